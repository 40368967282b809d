"""ColQwen3: vLLM's Qwen3-VL (vision tower, deepstack, M-RoPE, its multimodal processor) with
the shared ColPali head. colpali-engine saves the bare ``Qwen3VLModel`` (``visual.*``,
``language_model.*``), which vLLM's class loads under ``model.``."""

from __future__ import annotations

from typing import ClassVar

from vllm_factory.heads.colpali.image_processing import use_pil_image_processors

# Before vLLM's Qwen3-VL module imports transformers' torchvision-only image module.
use_pil_image_processors()

from vllm.model_executor.models.qwen3_vl import (
    Qwen3VLDummyInputsBuilder,
    Qwen3VLForConditionalGeneration,
    Qwen3VLMultiModalProcessor,
    Qwen3VLProcessingInfo,
)
from vllm.multimodal import MULTIMODAL_REGISTRY
from vllm_factory.core.compat import SupportsLateInteraction, default_pooling_type
from vllm_factory.heads.colpali.model import ColPaliModel, ImagesOnly


class ColQwen3ProcessingInfo(ImagesOnly, Qwen3VLProcessingInfo):
    """Qwen3-VL's processing info, images only."""


# CLS as the sequence pooling type, as vLLM's own ColQwen3 declares: whole prompts per step.
@default_pooling_type(seq_pooling_type="CLS", tok_pooling_type="ALL")
@MULTIMODAL_REGISTRY.register_processor(
    Qwen3VLMultiModalProcessor, info=ColQwen3ProcessingInfo, dummy_inputs=Qwen3VLDummyInputsBuilder
)
class ColQwen3(ColPaliModel, Qwen3VLForConditionalGeneration, SupportsLateInteraction):
    CHECKPOINT_PREFIXES: ClassVar[dict[str, str]] = {
        "visual.": "model.visual.",
        "language_model.": "model.language_model.",
    }
    TEXT_ARCHITECTURE: ClassVar[str | None] = "Qwen3ForCausalLM"
