"""The Hugging Face processor vLLM's Qwen3-VL multimodal processing uses for a Nemotron
ColEmbed checkpoint, and the processing info that names it.

NVIDIA's remote processor is a ``Qwen3VLProcessor`` made of an image processor and a tokenizer
only, so its checkpoint need not hold a video processor; transformers' ``Qwen3VLProcessor``
refuses to load without one. :class:`ImageOnlyQwen3VLProcessor` loads those two alone and makes,
in memory, a video processor of the image processor's patch grid for vLLM's start-up
bookkeeping (its dummy inputs always describe a video). Videos are not served: the
IOProcessor sends images and texts only.
"""

from __future__ import annotations

from typing import Any

from vllm_factory.heads.colpali.image_processing import use_pil_image_processors

# Before transformers' / vLLM's Qwen-VL modules import transformers' torchvision-only module.
use_pil_image_processors()

from transformers import Qwen3VLProcessor
from vllm.model_executor.models.qwen3_vl import Qwen3VLProcessingInfo
from vllm_factory.heads.colpali.model import ImagesOnly


def video_processor_like(image_processor: Any) -> Any:
    """A Qwen3-VL video processor with ``image_processor``'s patch grid, normalisation and pixel
    budget (per frame), as a stand-in that never processes a video."""
    from transformers.models.qwen3_vl.video_processing_qwen3_vl import Qwen3VLVideoProcessor

    size = dict(image_processor.size)
    frames = image_processor.temporal_patch_size
    return Qwen3VLVideoProcessor(
        patch_size=image_processor.patch_size, merge_size=image_processor.merge_size,
        temporal_patch_size=frames, image_mean=image_processor.image_mean,
        image_std=image_processor.image_std,
        size={"shortest_edge": size["shortest_edge"] * frames,
              "longest_edge": size["longest_edge"] * frames},
    )  # fmt: skip


class ImageOnlyQwen3VLProcessor(Qwen3VLProcessor):
    """``Qwen3VLProcessor`` loaded from an image processor and a tokenizer (what
    ``from_pretrained`` reads follows this signature); see the module docstring."""

    def __init__(
        self,
        image_processor: Any = None,
        tokenizer: Any = None,
        chat_template: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(image_processor, tokenizer, chat_template=chat_template, **kwargs)
        if image_processor is not None:
            self.video_processor = video_processor_like(image_processor)


class NemotronColEmbedProcessingInfo(ImagesOnly, Qwen3VLProcessingInfo):
    """Qwen3-VL's processing info with :class:`ImageOnlyQwen3VLProcessor`, images only
    (:class:`~vllm_factory.heads.colpali.model.ImagesOnly`: video keeps its key, as Qwen3-VL's
    start-up bookkeeping expects, with a limit of 0)."""

    def get_hf_processor(self, **kwargs: object) -> ImageOnlyQwen3VLProcessor:
        return self.ctx.get_hf_processor(ImageOnlyQwen3VLProcessor, **kwargs)
