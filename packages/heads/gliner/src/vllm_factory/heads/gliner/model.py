"""``GLiNERSpanModel``: the backbone-agnostic vLLM model class of every GLiNER package.

A model package subclasses it and provides only the backbone (:meth:`build_backbone`) and,
when its checkpoint names differ, :meth:`backbone_weight_name`. The backbone contract (the
one ``vllm_factory.backbones.modernbert.ModernBertEncoder`` has): ``Backbone(hf_config,
prefix=...)``, ``forward(input_ids, positions) -> [num_tokens, hidden]`` on vLLM's flat batch,
``embed_input_ids(input_ids)`` and ``load_weights(weights) -> set[str]`` taking Hugging Face
names. The served directory is made by ``vllm-factory-prep`` (config.json = the gliner
encoder config, plus gliner_config.json, weights and tokenizer).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, ClassVar

import torch
from torch import nn
from vllm.model_executor.models.utils import WeightsMapper
from vllm_factory.core.adapter import VllmPoolerAdapter
from vllm_factory.core.compat import default_pooling_type
from vllm_factory.core.model import FactoryModel
from vllm_factory.heads.gliner.head import GLiNERSpanHead
from vllm_factory.heads.gliner.settings import read_settings

# gliner's state dict puts the encoder under this prefix, the head modules at the top level.
GLINER_ENCODER_PREFIX = "token_rep_layer.bert_layer.model."


def adapter_mapper(*encoder_modules: str) -> WeightsMapper:
    """A LoRA adapter's module names -> the model's, for an encoder whose Hugging Face names
    are the backbone's own: PEFT's LoRA on gliner's encoder module names them from the
    encoder's top-level ``encoder_modules`` (``"encoder."``, ``"layers."``) and
    ``embeddings.``, one made on gliner's whole model behind :data:`GLINER_ENCODER_PREFIX`;
    all go under the model's ``model.``."""
    prefixes = {module: f"model.{module}" for module in (*encoder_modules, "embeddings.")}
    return WeightsMapper(orig_to_new_prefix={GLINER_ENCODER_PREFIX: "model.", **prefixes})


def head_dtype(model_config: Any) -> torch.dtype:
    """The span head's dtype: the model's (``--dtype``), as gliner runs a model cast to bfloat16,
    unless the served config names one (``--hf-overrides '{"head_dtype": "float32"}'``).

    vLLM's own default for pooling heads is float32. For GLiNER in bfloat16 that cost served
    throughput (docs/benchmarks/deberta_gliner.md), with a bfloat16 head's scores as close to gliner's as gliner's own bfloat16 run (the GPU check)."""
    if getattr(model_config.hf_config, "head_dtype", None) is None:
        return model_config.dtype
    return model_config.head_dtype


# CLS as the default sequence pooling makes vLLM treat the model as encoder-only:
# whole prompts per step, no chunked prefill, no prefix caching.
@default_pooling_type(seq_pooling_type="CLS", tok_pooling_type="ALL")
class GLiNERSpanModel(FactoryModel):
    # Weight-name prefix (before the encoder's own Hugging Face names) in the checkpoint.
    encoder_prefix: ClassVar[str] = GLINER_ENCODER_PREFIX

    def __init__(self, *, vllm_config: Any, prefix: str = "") -> None:
        super().__init__(vllm_config)
        model_config = self.model_config
        self.settings = read_settings(self.files)
        self.model = self.build_backbone(model_config.hf_config, prefix=f"{prefix}model")
        head = GLiNERSpanHead(
            self.settings,
            dtype=head_dtype(model_config),
            cuda_graphs=not getattr(model_config, "enforce_eager", False),
        )
        self.pooler = VllmPoolerAdapter(head, tasks=("plugin",))

    # -- what a backbone package provides ------------------------------------------------

    def build_backbone(self, hf_config: Any, prefix: str) -> nn.Module:
        raise NotImplementedError

    def backbone_weight_name(self, name: str) -> str | None:
        """The backbone's name for checkpoint tensor ``name``; None if it is not the encoder's."""
        if name.startswith(self.encoder_prefix):
            return name[len(self.encoder_prefix) :]
        return None

    # -- weights (embed_input_ids and forward: FactoryModel) ----------------------------------

    def load_weights(self, weights: Iterable[tuple[str, torch.Tensor]]) -> set[str]:
        head_weights: list[tuple[str, torch.Tensor]] = []

        def backbone_weights():
            for name, tensor in weights:
                name = name.removeprefix("model.")  # some savers keep the wrapper's prefix
                mapped = self.backbone_weight_name(name)
                if mapped is not None:
                    yield mapped, tensor
                else:
                    head_weights.append((name, tensor))

        loaded = {f"model.{name}" for name in self.model.load_weights(backbone_weights())}
        head = self.pooler.head
        loaded |= {f"pooler.head.{name}" for name in head.load_weights(head_weights)}
        return loaded
