"""The reference for Nemotron ColEmbed (``Qwen3VLNemotronEmbedModel``) on transformers' own
Qwen3-VL classes (runs in the ColPali reference venv; the ColPali kit's encoder loads
:class:`NemotronColEmbedHF` and :class:`NemotronColEmbedProcessorHF` by name).

NVIDIA's model is hub remote code only (not on PyPI, and no hub here), so its semantics are
reproduced with transformers' classes, configured as that code configures them:

- the model is transformers' ``Qwen3VLForConditionalGeneration`` (vision tower, deepstack,
  M-RoPE unchanged; weights ``model.visual.*``, ``model.language_model.*``, ``lm_head.*``);
- its language model attends bidirectionally: ``text_config.is_causal = False`` (transformers 5
  then builds a padding-only mask) and every text attention module's ``is_causal = False``;
- the final RMSNorm of the language model is not applied (the representations are the last
  decoder layer's output), though its weight stays in the checkpoint;
- no projection: every unmasked position's hidden state, L2-normalised, is a token vector.

The processor follows the remote processor's ``process_queries`` / ``process_documents``: the
checkpoint's chat template around ``"Query: " + query_prefix + " " + text`` (truncated to
``q_max_length`` tokens) for a query, and around the image then ``passage_prefix + " " + text``
for a document (``forward_images``: the text is empty; images converted to RGB). A text-only
document has no path there; here (and in the plugin) it is the document prompt without the
image, truncated to ``p_max_length``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from PIL import Image
from torch import nn
from transformers import (
    AutoImageProcessor,
    AutoTokenizer,
    Qwen3VLConfig,
    Qwen3VLForConditionalGeneration,
    Qwen3VLProcessor,
)

MODEL_TYPE = "qwen3_vl_nemotron_embed"
ARCHITECTURE = "Qwen3VLNemotronEmbedModel"
PROCESSOR_CLASS = "Qwen3VLNemotronEmbedProcessor"
# The remote processor's defaults (saved in processor_config.json by its save_pretrained).
SETTINGS = {"q_max_length": 512, "p_max_length": 4096, "query_prefix": "query:",
            "passage_prefix": "passage:", "reserve_tokens_for_images": 100}  # fmt: skip


def qwen3_vl_config(checkpoint: str | Path) -> Qwen3VLConfig:
    """The checkpoint's ``config.json`` as transformers' ``Qwen3VLConfig`` (its model_type names
    the remote configuration class, a ``Qwen3VLConfig`` subclass adding ``pooling``)."""
    data = json.loads((Path(checkpoint) / "config.json").read_text(encoding="utf-8"))
    if data.get("model_type") != MODEL_TYPE:
        raise ValueError(f"{checkpoint}: model_type {data.get('model_type')!r}, not {MODEL_TYPE}")
    for key in ("model_type", "auto_map", "architectures"):
        data.pop(key, None)
    return Qwen3VLConfig(**data)


def make_bidirectional_without_final_norm(model: Qwen3VLForConditionalGeneration) -> None:
    """Configure transformers' Qwen3-VL as the remote model runs: bidirectional text attention,
    final norm not applied (its weight kept)."""
    text = model.model.language_model
    model.config.text_config.is_causal = False
    text.config.is_causal = False
    for layer in text.layers:
        layer.self_attn.is_causal = False
    text.norm = nn.Identity()


class NemotronColEmbedHF(nn.Module):
    """``model(**batch)``: ``[batch, tokens, hidden]`` L2-normalised token vectors (zero at
    padding), as the remote ``forward_queries`` / ``forward_documents`` compute them."""

    def __init__(self, model: Qwen3VLForConditionalGeneration) -> None:
        super().__init__()
        make_bidirectional_without_final_norm(model)
        self.model = model

    @classmethod
    def from_pretrained(
        cls, checkpoint: str | Path, dtype: torch.dtype = torch.float32
    ) -> NemotronColEmbedHF:
        model = Qwen3VLForConditionalGeneration.from_pretrained(
            checkpoint, config=qwen3_vl_config(checkpoint), dtype=dtype
        )
        return cls(model.eval())

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor,
        pixel_values: torch.Tensor | None = None,
        image_grid_thw: torch.Tensor | None = None,
        **kwargs: Any,
    ) -> torch.Tensor:
        # kwargs: what else the processor returns (mm_token_type_ids, for M-RoPE positions).
        out = self.model.model(
            input_ids=input_ids, attention_mask=attention_mask, pixel_values=pixel_values,
            image_grid_thw=image_grid_thw, **kwargs,
        )  # fmt: skip
        hidden = out.last_hidden_state * attention_mask.unsqueeze(-1)
        return F.normalize(hidden, dim=-1)


class NemotronColEmbedProcessorHF(Qwen3VLProcessor):
    """Qwen3-VL's processor with the remote processor's settings and prompts (no video
    processor, as there)."""

    def __init__(
        self,
        image_processor: Any = None,
        tokenizer: Any = None,
        chat_template: str | None = None,
        q_max_length: int = SETTINGS["q_max_length"],
        p_max_length: int = SETTINGS["p_max_length"],
        query_prefix: str = SETTINGS["query_prefix"],
        passage_prefix: str = SETTINGS["passage_prefix"],
        reserve_tokens_for_images: int = SETTINGS["reserve_tokens_for_images"],
        **kwargs: Any,
    ) -> None:
        super().__init__(image_processor, tokenizer, chat_template=chat_template, **kwargs)
        self.q_max_length, self.p_max_length = q_max_length, p_max_length
        self.query_prefix, self.passage_prefix = query_prefix, passage_prefix
        self.reserve_tokens_for_images = reserve_tokens_for_images

    @classmethod
    def from_pretrained(cls, checkpoint: str | Path, **kwargs: Any) -> NemotronColEmbedProcessorHF:
        folder = Path(checkpoint)
        saved = json.loads((folder / "processor_config.json").read_text(encoding="utf-8"))
        settings = {key: saved.get(key, default) for key, default in SETTINGS.items()}
        return cls(
            image_processor=AutoImageProcessor.from_pretrained(folder, trust_remote_code=False),
            tokenizer=AutoTokenizer.from_pretrained(folder, trust_remote_code=False),
            **settings,
        )

    # -- prompts ---------------------------------------------------------------------------

    def chat(self, content: list[dict[str, Any]]) -> str:
        messages = [{"role": "user", "content": content}]
        return self.tokenizer.apply_chat_template(
            messages, tokenize=False, add_generation_prompt=True
        )

    def query_text(self, query: str) -> str:
        body = f"{self.query_prefix} {query}" if self.query_prefix else query
        return self.chat([{"type": "text", "text": f"Query: {body}"}])

    def passage(self, text: str) -> str:
        return f"{self.passage_prefix} {text}" if self.passage_prefix else text

    @property
    def visual_prompt_prefix(self) -> str:
        """The prompt of an image document (its text empty)."""
        return self.chat([{"type": "image"}, {"type": "text", "text": self.passage("")}])

    query_augmentation_token = None

    # -- the encoder's three calls, one item each ------------------------------------------

    def process_queries(self, queries: list[str]) -> Any:
        return self(
            text=[self.query_text(q) for q in queries], truncation=True,
            max_length=self.q_max_length, padding=True, return_tensors="pt",
        )  # fmt: skip

    def process_texts(self, texts: list[str]) -> Any:
        prompts = [self.chat([{"type": "text", "text": self.passage(t)}]) for t in texts]
        return self(
            text=prompts, truncation=True, max_length=self.p_max_length, padding=True,
            return_tensors="pt",
        )  # fmt: skip

    def process_images(self, images: list[Image.Image]) -> Any:
        images = [im if im.mode == "RGB" else im.convert("RGB") for im in images]
        grids = self.image_processor(images=images, return_tensors="pt")["image_grid_thw"]
        most = int(grids.prod(dim=-1).max()) // (self.image_processor.merge_size**2)
        available = self.p_max_length - most - self.reserve_tokens_for_images
        if available <= 0:
            raise ValueError(f"p_max_length {self.p_max_length} leaves no room for {most} "
                             f"image tokens + {self.reserve_tokens_for_images}")  # fmt: skip
        return self(
            text=[self.visual_prompt_prefix] * len(images), images=images, truncation=True,
            max_length=available, padding=True, return_tensors="pt",
        )  # fmt: skip
