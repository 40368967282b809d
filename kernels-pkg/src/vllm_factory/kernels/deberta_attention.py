"""DeBERTa-v2/v3 disentangled self-attention over packed variable-length sequences.

For query ``i`` and key ``j`` of one sequence and one head, with ``r = idx(i - j)`` the
clamped relative-position bucket (see ``relative_position_index``)::

    score(i, j) = (q_i . k_j  +  q_i . pos_key_r  +  k_j . pos_query_r) / sqrt(D * factor)

``q_i . pos_key_r`` is content-to-position (c2p), ``k_j . pos_query_r`` position-to-content
(p2c); ``factor`` is 1 plus one per enabled term. ``pos_key`` / ``pos_query`` are the relative
embeddings ``[2 * span, hidden]`` put through the key / query projection (``share_att_key``) or
through ``pos_key_proj`` / ``pos_query_proj``, split into heads. Because the bucket function
is odd (``bucket(-d) == -bucket(d)``), HF's p2c index ``clamp(-bucket(j - i) + span)`` equals
the c2p index ``clamp(bucket(i - j) + span)``, so one table serves both terms.

Both paths first project every token against all ``2 * span`` relative embeddings
(``[H, T, 2 * span]`` per term), then read the needed entry per (query, key) pair: the
Triton kernel per tile inside a flash-style online softmax (no ``[L, L]`` scores in global
memory), the PyTorch fallback on padded ``[B, H, L, L]`` batches of sequences of similar
length (``_length_groups``).
"""

from __future__ import annotations

import itertools
import math
from typing import NamedTuple

import torch

from ._dispatch import select_backend
from .rows_attention import _check_out, _into, check_scores


def relative_position_index(
    max_seqlen: int,
    span: int,
    position_buckets: int = -1,
    max_relative_positions: int = -1,
    device: torch.device | str | None = None,
) -> torch.Tensor:
    """int32 ``[2 * max_seqlen - 1]``: entry ``d + max_seqlen - 1`` is the row of the
    ``[2 * span]`` relative embeddings used for ``d = query position - key position``.

    Same bucketing as Hugging Face's DebertaV2 (``make_log_bucket_position`` when
    ``position_buckets > 0 and max_relative_positions > 0``), computed with the same fp32
    ops so that ``ceil`` lands on the same side at bucket edges.
    """
    if max_seqlen < 1 or span < 1:
        raise ValueError(f"max_seqlen and span must be >= 1, got {max_seqlen}, {span}")
    rel = torch.arange(-(max_seqlen - 1), max_seqlen, dtype=torch.long, device=device)
    if position_buckets > 0 and max_relative_positions > 0:
        mid = position_buckets // 2
        near = (rel < mid) & (rel > -mid)
        dist = torch.where(near, torch.full_like(rel, mid - 1), rel.abs())
        # float32 whatever the default dtype (vLLM builds a bf16 model under a bf16 default,
        # where 146 of 1023 buckets of DeBERTa-v3's table came out wrong)
        ratio = torch.tensor((max_relative_positions - 1) / mid, dtype=torch.float32)
        log_ratio = torch.log(ratio.to(device))
        far = torch.ceil(torch.log(dist.to(torch.float32) / mid) / log_ratio * (mid - 1)) + mid
        bucket = torch.where(dist <= mid, rel.to(far.dtype), far * torch.sign(rel)).long()
    else:
        bucket = rel
    return torch.clamp(bucket + span, 0, 2 * span - 1).to(torch.int32)


def _check_args(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    cu_seqlens: torch.Tensor,
    pos_key: torch.Tensor | None,
    pos_query: torch.Tensor | None,
) -> int:
    """Validate shapes; return ``span`` (0 without relative terms)."""
    if q.dim() != 3 or k.shape != q.shape or v.shape != q.shape:
        raise ValueError(
            f"q, k, v must all be [T, H, D]; got {tuple(q.shape)}, {tuple(k.shape)}, "
            f"{tuple(v.shape)}"
        )
    if not q.is_floating_point() or k.dtype != q.dtype or v.dtype != q.dtype:
        raise ValueError(f"q, k, v must share one floating dtype: {q.dtype}, {k.dtype}, {v.dtype}")
    if cu_seqlens.dim() != 1 or cu_seqlens.numel() < 1 or cu_seqlens.is_floating_point():
        raise ValueError("cu_seqlens must be an integer [B + 1] tensor")
    span = 0
    for name, pos in (("pos_key", pos_key), ("pos_query", pos_query)):
        if pos is None:
            continue
        if pos.dim() != 3 or pos.shape[1:] != q.shape[1:] or pos.shape[0] % 2:
            raise ValueError(f"{name} must be [2 * span, H, D], got {tuple(pos.shape)}")
        if span and pos.shape[0] // 2 != span:
            raise ValueError("pos_key and pos_query must have the same span")
        span = pos.shape[0] // 2
    return span


class AttentionInputs(NamedTuple):
    """One validated call, as both paths take it: packed ``[T, H, D]`` q / k / v, the
    ``[B + 1]`` boundaries, the ``[H, T, 2 * span]`` relative projections (or None) with
    their bucket table, and the softmax scale."""

    q: torch.Tensor
    k: torch.Tensor
    v: torch.Tensor
    cu_seqlens: torch.Tensor
    max_seqlen: int
    c2p: torch.Tensor | None
    p2c: torch.Tensor | None
    rel_index: torch.Tensor | None
    sm_scale: float


def relative_scores(x: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
    """``[T, H, D] x [2S, H, D] -> [H, T, 2S]``: every token against every relative row
    (``relative_scores(q, pos_key)`` is c2p, ``relative_scores(k, pos_query)`` p2c). One
    ``bmm``: a compiled encoder computes it in its graph and hands the result to
    :func:`flash_deberta_attention` (``c2p=`` / ``p2c=``)."""
    return torch.bmm(x.transpose(0, 1), pos.permute(1, 2, 0))


# Padded tokens (sequences x longest length) per group of the fallback. One padded batch of
# a large mixed-length batch wastes most of its [B, H, L, L] work on padding and builds
# tensors far past the CPU caches: 64 sequences (half 128 tokens, half 6-32), 12 heads of
# 64, 2 threads took 561 ms per layer as one batch, 447 / 365 / 312 / 249 ms in groups of
# 4096 / 2048 / 1024 / 512 padded tokens, 329 ms one sequence at a time.
PADDED_TOKENS_PER_GROUP = 512


def _length_groups(lengths: list[int], budget: int) -> list[list[int]]:
    """Sequence indices, longest first, cut into groups of at most ``budget`` padded tokens
    (a group always holds at least one sequence)."""
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
    groups: list[list[int]] = []
    for i in order:
        if groups and (len(groups[-1]) + 1) * lengths[groups[-1][0]] <= budget:
            groups[-1].append(i)
        else:
            groups.append([i])
    return groups


def _deberta_attention_torch(x: AttentionInputs) -> torch.Tensor:
    """The fallback: on CPU each group of similar-length sequences through the padded path;
    on a GPU (no Triton) one padded batch, which keeps the device busy and needs no sync."""
    if x.q.device.type != "cpu":
        return _padded_attention(x)
    cu = x.cu_seqlens.tolist()
    lengths = [end - start for start, end in itertools.pairwise(cu)]
    groups = _length_groups(lengths, PADDED_TOKENS_PER_GROUP)
    if len(groups) == 1:
        return _padded_attention(x)
    out = torch.empty_like(x.q)
    for members in groups:
        rows = torch.cat([torch.arange(cu[i], cu[i + 1]) for i in members]).to(x.q.device)
        sizes = [lengths[i] for i in members]
        group = x._replace(
            q=x.q[rows], k=x.k[rows], v=x.v[rows],
            cu_seqlens=torch.tensor([0, *itertools.accumulate(sizes)], device=x.q.device),
            max_seqlen=max(sizes),
            c2p=None if x.c2p is None else x.c2p[:, rows],
            p2c=None if x.p2c is None else x.p2c[:, rows],
        )  # fmt: skip
        out[rows] = _padded_attention(group)
    return out


def _padded_attention(x: AttentionInputs) -> torch.Tensor:
    """Padded ``[B, H, L, L]`` reference path, fp32 softmax."""
    q, k, v, cu_seqlens, max_seqlen, c2p, p2c, rel_index, sm_scale = x
    tokens, heads, head_dim = q.shape
    device = q.device
    cu = cu_seqlens.to(device=device, dtype=torch.long)
    lengths = cu[1:] - cu[:-1]
    batch, length = lengths.numel(), max_seqlen
    seq = torch.repeat_interleave(torch.arange(batch, device=device), lengths, output_size=tokens)
    flat = seq * length + (torch.arange(tokens, device=device) - cu[seq])

    def pad(x: torch.Tensor) -> torch.Tensor:  # [T, H, W] -> [B, H, L, W]
        out = x.new_zeros(batch * length, *x.shape[1:])
        out[flat] = x
        return out.view(batch, length, *x.shape[1:]).transpose(1, 2)

    qp, kp, vp = (pad(t.float()) for t in (q, k, v))
    scores = qp @ kp.transpose(-1, -2)
    if c2p is not None or p2c is not None:
        assert rel_index is not None
        offset = (rel_index.numel() + 1) // 2 - 1
        pos = torch.arange(length, device=device)
        idx = rel_index.to(device=device, dtype=torch.long)[pos[:, None] - pos[None, :] + offset]
        gather_shape = (batch, heads, length, length)
        if c2p is not None:  # [H, T, 2S] -> [B, H, L, 2S]; row i, column idx[i, j]
            c2p_p = pad(c2p.transpose(0, 1).float())
            scores = scores + torch.gather(c2p_p, -1, idx.expand(gather_shape))
        if p2c is not None:  # row j (the key), column idx[i, j]
            p2c_p = pad(p2c.transpose(0, 1).float())
            scores = scores + torch.gather(p2c_p, -1, idx.t().expand(gather_shape)).transpose(
                -1, -2
            )
    scores = scores * sm_scale
    key_valid = torch.arange(length, device=device)[None, :] < lengths[:, None]  # [B, L]
    scores = scores.masked_fill(~key_valid[:, None, None, :], float("-inf"))
    probs = torch.softmax(scores, dim=-1)
    out = (probs @ vp).transpose(1, 2).reshape(batch * length, heads, head_dim)
    return out[flat].to(q.dtype)


def flash_deberta_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    cu_seqlens: torch.Tensor,
    max_seqlen: int,
    pos_key: torch.Tensor | None = None,
    pos_query: torch.Tensor | None = None,
    position_buckets: int = -1,
    max_relative_positions: int = -1,
    scale_factor: int | None = None,
    *,
    rel_index: torch.Tensor | None = None,
    c2p: torch.Tensor | None = None,
    p2c: torch.Tensor | None = None,
    out: torch.Tensor | None = None,
    backend: str = "auto",
) -> torch.Tensor:
    """DeBERTa disentangled attention of packed ``[T, H, D]`` q/k/v; returns ``[T, H, D]``.

    ``cu_seqlens`` ``[B + 1]`` holds the sequence boundaries in the packed batch and
    ``max_seqlen`` the longest sequence. ``pos_key`` enables c2p, ``pos_query`` p2c (both
    ``[2 * span, H, D]``, see the module docstring); with neither this is plain attention
    scaled by ``1 / sqrt(D)``. ``scale_factor`` overrides the ``factor`` counted from the
    enabled terms: HF counts ``pos_att_type`` even when ``relative_attention`` is off. ``rel_index`` (from ``relative_position_index`` for at least
    ``max_seqlen``) may be passed in to reuse one table across layers; it is built from
    ``position_buckets`` / ``max_relative_positions`` otherwise.

    ``c2p`` / ``p2c`` (``[H, T, 2 * span]``, :func:`relative_scores`) may be given instead of
    ``pos_key`` / ``pos_query``: the relative scores already computed, e.g. inside a compiled
    graph, so that this call launches the attention alone. ``out`` (``[T, H, D]``, q's dtype)
    receives the result, which is also returned.
    """
    if c2p is not None and pos_key is not None or p2c is not None and pos_query is not None:
        raise ValueError("give c2p / p2c or pos_key / pos_query, not both")
    span = _check_args(q, k, v, cu_seqlens, pos_key, pos_query)
    span = check_scores(q, c2p, p2c, span)
    _check_out(q, out)
    if span:
        if rel_index is None:
            rel_index = relative_position_index(
                max_seqlen, span, position_buckets, max_relative_positions, q.device
            )
        elif rel_index.numel() < 2 * max_seqlen - 1 or rel_index.numel() % 2 == 0:
            raise ValueError("rel_index must come from relative_position_index(>= max_seqlen)")
    if pos_key is not None:
        c2p = relative_scores(q, pos_key)
    if pos_query is not None:
        p2c = relative_scores(k, pos_query)
    tensors = [t for t in (q, k, v, cu_seqlens, c2p, p2c) if t is not None]
    if q.shape[0] == 0:
        return torch.empty_like(q) if out is None else out
    sm_scale = _softmax_scale(q, c2p, p2c, scale_factor)
    inputs = AttentionInputs(q, k, v, cu_seqlens, max_seqlen, c2p, p2c, rel_index, sm_scale)
    if select_backend(backend, *tensors, kernel="flash_deberta_attention") == "triton":
        from ._triton_deberta_attention import deberta_attention_triton

        return _into(out, q, lambda target: deberta_attention_triton(inputs, target))
    result = _deberta_attention_torch(inputs)
    return result if out is None else out.copy_(result)


def _softmax_scale(
    q: torch.Tensor, c2p: torch.Tensor | None, p2c: torch.Tensor | None, scale_factor: int | None
) -> float:
    """``1 / sqrt(D * factor)``, ``factor`` counting the enabled terms unless given."""
    factor = 1 + (c2p is not None) + (p2c is not None) if scale_factor is None else scale_factor
    return 1.0 / math.sqrt(q.shape[-1] * factor)
