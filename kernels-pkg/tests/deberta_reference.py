"""Hugging Face DebertaV2 attention as the reference for ``flash_deberta_attention``.

``hf_case`` builds HF's ``DisentangledSelfAttention`` with random weights, runs it on a
padded batch (attention mask as ``DebertaV2Encoder`` builds it) and returns the packed
inputs our function takes plus HF's output for the real tokens.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass
class DebertaCase:
    q: torch.Tensor  # [T, H, D]
    k: torch.Tensor
    v: torch.Tensor
    cu_seqlens: torch.Tensor  # [B + 1] int32
    max_seqlen: int
    pos_key: torch.Tensor | None  # [2 * span, H, D]
    pos_query: torch.Tensor | None
    position_buckets: int
    max_relative_positions: int
    scale_factor: int  # HF counts pos_att_type even without relative attention
    expected: torch.Tensor  # HF context layer for the real tokens, [T, H, D]

    def args(self, dtype: torch.dtype = torch.float32, device: str = "cpu") -> tuple:
        def cast(t: torch.Tensor | None) -> torch.Tensor | None:
            return None if t is None else t.to(device=device, dtype=dtype)

        return (
            cast(self.q), cast(self.k), cast(self.v), self.cu_seqlens.to(device),
            self.max_seqlen, cast(self.pos_key), cast(self.pos_query),
            self.position_buckets, self.max_relative_positions, self.scale_factor,
        )  # fmt: skip


def hf_case(
    lengths: list[int],
    heads: int = 2,
    head_dim: int = 32,
    position_buckets: int = 8,
    max_relative_positions: int = 32,
    pos_att_type: str = "p2c|c2p",
    share_att_key: bool = True,
    relative_attention: bool = True,
    seed: int = 0,
) -> DebertaCase:
    from transformers import DebertaV2Config
    from transformers.models.deberta_v2 import modeling_deberta_v2 as hf

    torch.manual_seed(seed)
    hidden = heads * head_dim
    config = DebertaV2Config(
        hidden_size=hidden,
        num_attention_heads=heads,
        intermediate_size=2 * hidden,
        max_position_embeddings=512,
        relative_attention=relative_attention,
        position_buckets=position_buckets,
        max_relative_positions=max_relative_positions,
        pos_att_type=pos_att_type,
        share_att_key=share_att_key,
        attention_probs_dropout_prob=0.0,
        hidden_dropout_prob=0.0,
    )
    attn = hf.DisentangledSelfAttention(config).eval()
    with torch.no_grad():
        for param in attn.parameters():  # O(1) scores, so that softmax is far from uniform
            param.normal_(0.0, 1.5 * hidden**-0.5)
    span = position_buckets if position_buckets > 0 else max_relative_positions
    rel_embeddings = torch.randn(2 * span, hidden)

    batch, longest = len(lengths), max(lengths)
    padded = torch.randn(batch, longest, hidden)
    mask = torch.zeros(batch, longest, dtype=torch.long)
    for b, n in enumerate(lengths):
        mask[b, :n] = 1
    # DebertaV2Encoder.get_attention_mask: [B, 1, L, L] = m_i * m_j
    mask4 = mask[:, None, None, :] * mask[:, None, :, None]
    with torch.no_grad():
        expected, _ = attn(padded, mask4, rel_embeddings=rel_embeddings)
        tokens = padded[mask.bool()]  # [T, hidden], sequence by sequence

        def heads_of(x: torch.Tensor) -> torch.Tensor:
            return x.view(x.shape[0], heads, head_dim)

        q = heads_of(attn.query_proj(tokens))
        k = heads_of(attn.key_proj(tokens))
        v = heads_of(attn.value_proj(tokens))
        pos_key = pos_query = None
        types = attn.pos_att_type if relative_attention else []
        if "c2p" in types:
            proj = attn.key_proj if share_att_key else attn.pos_key_proj
            pos_key = heads_of(proj(rel_embeddings))
        if "p2c" in types:
            proj = attn.query_proj if share_att_key else attn.pos_query_proj
            pos_query = heads_of(proj(rel_embeddings))
    cu = torch.zeros(batch + 1, dtype=torch.int32)
    cu[1:] = torch.cumsum(torch.tensor(lengths), 0)
    return DebertaCase(
        q, k, v, cu, longest, pos_key, pos_query, position_buckets, max_relative_positions,
        1 + sum(t in attn.pos_att_type for t in ("c2p", "p2c")), heads_of(expected[mask.bool()]),
    )  # fmt: skip
