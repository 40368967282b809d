"""EmbeddingGemma: a bidirectional Gemma3 encoder + the sentence-transformers head, as a vLLM
pooling model.

Loads a sentence-transformers checkpoint as saved: transformer weights from the top-level
safetensors, the projections from the ``Dense`` module folders. Serves two tasks:

- ``plugin``: POST /pooling through the ``embeddinggemma_io`` IOProcessor (prompt names,
  Matryoshka sizes, sentence-transformers semantics);
- ``embed``: vLLM's own ``/v1/embeddings`` (and /pooling without ``data``), the text embedded
  as given; ``dimensions`` truncates and re-normalises, as vLLM's native embedding models do.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import ClassVar

import torch
from vllm_factory.core import compat
from vllm_factory.core.adapter import VllmPoolerAdapter
from vllm_factory.core.checkpoint import CheckpointFiles
from vllm_factory.core.compat import default_pooling_type
from vllm_factory.core.model import FactoryModel
from vllm_factory.core.pooler import PoolerRequest
from vllm_factory.models.embeddinggemma.encoder import Gemma3BidirectionalEncoder
from vllm_factory.models.embeddinggemma.head import EmbeddingGemmaHead
from vllm_factory.models.embeddinggemma.settings import read_settings

logger = logging.getLogger(__name__)

TASKS = ("embed", "plugin")


def sliding_half_window(files: CheckpointFiles, hf_config) -> int | None:
    """Largest ``|query - key|`` a sliding layer may attend, as Hugging Face's bidirectional
    Gemma3 mask allows it: ``sliding_window // 2`` of the window written in config.json.

    Read from the file because transformers rewrites ``sliding_window`` on load for
    bidirectional configs (to ``window // 2 + 1``, an exclusive bound)."""
    raw = (files.json("config.json") or {}).get("sliding_window")
    if raw is not None:
        return int(raw) // 2
    window = getattr(hf_config, "sliding_window", None)
    return None if window is None else int(window) - 1


class EmbeddingPoolerAdapter(VllmPoolerAdapter):
    """Passes ``embed`` requests' ``dimensions`` to the head (it re-normalises after cutting)."""

    def forward(
        self, hidden_states: torch.Tensor, pooling_metadata: compat.PoolingMetadata
    ) -> list[torch.Tensor]:
        sizes = compat.scheduled_token_counts(pooling_metadata)
        per_sequence = list(torch.split(hidden_states, sizes))
        requests = []
        for params in pooling_metadata.pooling_params:
            extra = dict(params.extra_kwargs or {})
            if getattr(params, "task", None) == "embed" and params.dimensions is not None:
                extra["dimensions"] = int(params.dimensions)
                extra["renormalize"] = getattr(params, "use_activation", None) is not False
            requests.append(PoolerRequest(extra=extra))
        return self.head(per_sequence, requests)


# MEAN matches what the head does; ``attn_type`` makes vLLM schedule whole prompts (no
# chunked prefill, no prefix caching), which the packed attention relies on.
@default_pooling_type(seq_pooling_type="MEAN", tok_pooling_type="ALL")
class EmbeddingGemma(FactoryModel):
    attn_type: ClassVar[str] = "encoder_only"

    def __init__(self, *, vllm_config, prefix: str = "") -> None:
        super().__init__(vllm_config)
        compat.refuse_quantization(vllm_config, "EmbeddingGemma")
        model_config = self.model_config
        hf_config = model_config.hf_config
        if not getattr(hf_config, "use_bidirectional_attention", False):
            raise ValueError(
                "EmbeddingGemmaForEmbedding needs a Gemma3 config with "
                "use_bidirectional_attention: true (an EmbeddingGemma checkpoint)"
            )
        files = self.files
        self.settings = read_settings(
            files, hf_config.hidden_size, getattr(hf_config, "matryoshka_dimensions", None)
        )
        self.model = Gemma3BidirectionalEncoder(
            vllm_config=vllm_config,
            prefix=f"{prefix}model",
            config=hf_config,
            half_window=sliding_half_window(files, hf_config),
        )
        head = EmbeddingGemmaHead(self.settings, dtype=model_config.head_dtype)
        self.pooler = EmbeddingPoolerAdapter(head, tasks=TASKS)
        logger.info(
            "EmbeddingGemma: %d layers, %d Dense, dimension %d, prompts %s, Matryoshka %s",
            hf_config.num_hidden_layers,
            len(self.settings.dense),
            self.settings.dimension,
            sorted(self.settings.prompts),
            list(self.settings.matryoshka_dims),
        )

    def load_weights(self, weights: Iterable[tuple[str, torch.Tensor]]) -> set[str]:
        loaded = {f"model.{name}" for name in self.model.load_weights(weights)}
        loaded |= {f"pooler.head.{name}" for name in self.pooler.head.load_checkpoint_weights()}
        return loaded
