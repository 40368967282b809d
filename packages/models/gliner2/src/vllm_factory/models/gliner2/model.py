"""GLiNER2Model: an encoder + the GLiNER2 span-architecture heads; DebertaGLiNER2: on our
DeBERTa-v2/v3 encoder.

The library's state dict keeps the encoder under ``encoder.`` (the Hugging Face encoder's own
names) and the heads at the top level (``span_rep.``, ``classifier.``, ``count_pred.``,
``count_embed.``). The served config is the encoder's (``--config-format gliner2``); the heads'
settings come from the checkpoint's own ``config.json``. A package for another encoder
subclasses :class:`GLiNER2Model` and gives :meth:`~GLiNER2Model.build_encoder` (and
:meth:`~GLiNER2Model.load_encoder` where its loader takes more arguments).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, ClassVar

import torch
from torch import nn
from vllm.model_executor.models.utils import WeightsMapper
from vllm_factory.backbones.deberta import LORA_PACKED_MODULES, DebertaV2Encoder
from vllm_factory.core.adapter import VllmPoolerAdapter
from vllm_factory.core.compat import default_pooling_type
from vllm_factory.core.lora import FactoryLoRA
from vllm_factory.core.model import FactoryModel
from vllm_factory.models.gliner2.head import GLiNER2Head
from vllm_factory.models.gliner2.settings import read_settings

ENCODER_PREFIX = "encoder."


# CLS as the default sequence pooling makes vLLM treat the model as encoder-only:
# whole prompts per step, no chunked prefill, no prefix caching.
@default_pooling_type(seq_pooling_type="CLS", tok_pooling_type="ALL")
class GLiNER2Model(FactoryModel):
    def __init__(self, *, vllm_config: Any, prefix: str = "") -> None:
        super().__init__(vllm_config)
        self.settings = read_settings(self.files)
        hf_config = self.model_config.hf_config
        self.model = self.build_encoder(hf_config, prefix=f"{prefix}model")
        head = GLiNER2Head(
            self.settings.hidden_size, self.settings.max_width, dtype=self.model_config.head_dtype
        )
        self.pooler = VllmPoolerAdapter(head, tasks=("plugin",))

    def build_encoder(self, hf_config: Any, prefix: str) -> nn.Module:
        """The packed encoder for the served (encoder's) config."""
        raise NotImplementedError

    def load_encoder(self, weights: Iterable[tuple[str, torch.Tensor]]) -> set[str]:
        """Load the library's encoder weights, ``encoder.`` already removed from their names."""
        return self.model.load_weights(weights)

    def load_weights(self, weights: Iterable[tuple[str, torch.Tensor]]) -> set[str]:
        head_weights: list[tuple[str, torch.Tensor]] = []

        def encoder_weights():
            for name, tensor in weights:
                if name.startswith(ENCODER_PREFIX):
                    yield name[len(ENCODER_PREFIX) :], tensor
                else:
                    head_weights.append((name, tensor))

        loaded = {f"model.{name}" for name in self.load_encoder(encoder_weights())}
        head = self.pooler.head
        loaded |= {f"pooler.head.{name}" for name in head.load_weights(head_weights)}
        return loaded


class DebertaGLiNER2(GLiNER2Model, FactoryLoRA):
    """vLLM's LoRA (``--enable-lora``) wraps the encoder's parallel linear layers; gliner2's
    adapters (PEFT's layout) name them as the library's state dict does, under ``encoder.``,
    which the mapper turns into this model's ``model.``. The heads are plain torch layers that
    vLLM's LoRA does not wrap: an adapter that targets them is refused when it loads."""

    packed_modules_mapping: ClassVar[dict[str, list[str]]] = LORA_PACKED_MODULES
    hf_to_vllm_mapper = WeightsMapper(orig_to_new_prefix={ENCODER_PREFIX: "model."})

    def build_encoder(self, hf_config: Any, prefix: str) -> nn.Module:
        return DebertaV2Encoder(hf_config, prefix=prefix)

    def load_encoder(self, weights: Iterable[tuple[str, torch.Tensor]]) -> set[str]:
        return self.model.load_weights(weights, ())  # the names are bare
