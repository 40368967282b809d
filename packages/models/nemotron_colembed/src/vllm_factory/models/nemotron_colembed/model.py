"""Nemotron ColEmbed: vLLM's Qwen3-VL (vision tower, deepstack, M-RoPE, its multimodal
processor) run as NVIDIA's remote code runs it, with the shared ColPali head in its
normalise-only form:

- bidirectional text attention: ``is_causal = False`` on the config and its text config before
  the layers are built, so that vLLM's Qwen3 decoder layers use encoder-only attention (no KV
  cache, whole prompts per step). ``--config-format colpali`` declares the same in the served
  config (the package's ``COLPALI_CONFIG_UPDATE``), so vLLM's own checks see it too;
- the language model's final RMSNorm is not applied (:class:`UnappliedNorm` keeps its weight,
  which the checkpoint holds, and returns the residual stream's sum as it stands);
- no projection: every token's last hidden state, L2-normalised.

Its processor: Qwen3-VL's, from an image processor and a tokenizer alone (``processing``).
NVIDIA saves ``Qwen3VLForConditionalGeneration``'s names (``model.visual.*``,
``model.language_model.*``, ``lm_head.*``), which vLLM's Qwen3-VL class maps itself; the LM head
is dropped (a retriever computes no logits).
"""

from __future__ import annotations

from typing import Any, ClassVar

import torch
from torch import nn
from vllm_factory.heads.colpali.image_processing import use_pil_image_processors

# Before vLLM's Qwen3-VL module imports transformers' torchvision-only image module.
use_pil_image_processors()

from vllm.model_executor.models.qwen3_vl import (
    Qwen3VLDummyInputsBuilder,
    Qwen3VLForConditionalGeneration,
    Qwen3VLMultiModalProcessor,
)
from vllm.multimodal import MULTIMODAL_REGISTRY
from vllm_factory.core.compat import SupportsLateInteraction, default_pooling_type
from vllm_factory.heads.colpali.model import ColPaliModel
from vllm_factory.models.nemotron_colembed.processing import NemotronColEmbedProcessingInfo


class UnappliedNorm(nn.Module):
    """Stands in for the final ``RMSNorm(hidden_states, residual)`` of vLLM's language model
    and returns what that norm would normalise: ``hidden_states + residual``. Its ``weight`` is
    the replaced norm's parameter, so the checkpoint's tensor still loads (and goes unused, as
    in the reference)."""

    def __init__(self, norm: nn.Module) -> None:
        super().__init__()
        self.weight = norm.weight

    def forward(
        self, hidden_states: torch.Tensor, residual: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        if residual is not None:
            hidden_states = hidden_states + residual
        return hidden_states, hidden_states


def make_bidirectional(hf_config: Any) -> None:
    """Declare bidirectional attention on the config and its text config (what vLLM's Qwen3
    decoder layers read when they are built)."""
    hf_config.is_causal = False
    hf_config.get_text_config().is_causal = False


# CLS as the sequence pooling type, as vLLM's own ColQwen3 declares: whole prompts per step.
@default_pooling_type(seq_pooling_type="CLS", tok_pooling_type="ALL")
@MULTIMODAL_REGISTRY.register_processor(
    Qwen3VLMultiModalProcessor,
    info=NemotronColEmbedProcessingInfo,
    dummy_inputs=Qwen3VLDummyInputsBuilder,
)
class NemotronColEmbed(ColPaliModel, Qwen3VLForConditionalGeneration, SupportsLateInteraction):
    PROJECTION: ClassVar[bool] = False
    TEXT_ARCHITECTURE: ClassVar[str | None] = "Qwen3ForCausalLM"

    def __init__(self, *, vllm_config: Any, prefix: str = "model") -> None:
        hf_config = vllm_config.model_config.hf_config
        make_bidirectional(hf_config)
        super().__init__(vllm_config=vllm_config, prefix=prefix)
        language_model = self.language_model.model
        language_model.norm = UnappliedNorm(language_model.norm)
