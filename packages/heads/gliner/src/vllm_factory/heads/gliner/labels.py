"""Bi-encoder GLiNER labels: the label encoder and the engine's label-vector cache (no vLLM).

A bi-encoder checkpoint (gliner's ``BiEncoderSpanModel``; the GLiNER linker models and the
``gliner-bi-*`` models) reads no label vectors off the prompt: each label is tokenized with
the checkpoint's ``labels_tokenizer``, run through its own encoder (any Hugging Face encoder
gliner loads, built here from ``labels_encoder_config`` with transformers' own classes),
projected when the widths differ and mean-pooled over its tokens. The head then applies its
``prompt_rep_layer``; that final vector depends on the label's tokens alone, so it is cached
by them, bounded in number, with hit / miss / eviction counts (on the server's ``/metrics``
as ``vllm_factory:gliner_label_cache_*``, through :mod:`vllm_factory.heads.gliner.stats`).
"""

from __future__ import annotations

import logging
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import nn
from vllm_factory.core import envs
from vllm_factory.heads.gliner.stats import SharedCounters

logger = logging.getLogger(__name__)

# Key of the per-request label token ids inside ``PoolingParams.extra_kwargs``.
LABELS_KEY = "gliner_label_ids"
# How many label vectors the engine keeps (each ``hidden_size`` values in the model dtype).
CACHE_ENV = envs.GLINER_LABEL_CACHE.name
DEFAULT_CACHE_SIZE = envs.GLINER_LABEL_CACHE.default
# Labels encoded in one call of the label encoder (bounds its activation memory).
ENCODE_BATCH = 256
# The cache's counters go to the log at most this often (seconds), when they changed.
REPORT_EVERY = 60.0
# Their name among the engine's shared counters, and how /metrics shows them.
STATS_NAME = "gliner-label-cache"
METRICS = {
    "hits": ("vllm_factory:gliner_label_cache_hits_total",
             "GLiNER bi-encoder labels whose vector came from the engine's cache"),
    "misses": ("vllm_factory:gliner_label_cache_misses_total",
               "GLiNER bi-encoder labels run through the label encoder"),
    "evictions": ("vllm_factory:gliner_label_cache_evictions_total",
                  "label vectors dropped from the cache (least recently used)"),
    "size": ("vllm_factory:gliner_label_cache_size", "label vectors held in the cache"),
    "capacity": ("vllm_factory:gliner_label_cache_capacity",
                 "label vectors the cache may hold (VLLM_FACTORY_GLINER_LABEL_CACHE)"),
}  # fmt: skip
# Saved-config keys that are not model settings.
_NOT_SETTINGS = ("_name_or_path", "architectures", "transformers_version", "torch_dtype", "dtype")


def cache_size_from_env() -> int:
    """Label vectors the cache holds (``VLLM_FACTORY_GLINER_LABEL_CACHE``; 0: no cache)."""
    return envs.get(envs.GLINER_LABEL_CACHE)


def hf_encoder(config: dict[str, Any]) -> nn.Module:
    """A randomly initialised Hugging Face encoder for a saved config dict (weights follow)."""
    from transformers import AutoConfig, AutoModel

    settings = {k: v for k, v in config.items() if k not in _NOT_SETTINGS}
    model_type = settings.pop("model_type")
    # from_config leaves the model in training mode: dropout would be live.
    return AutoModel.from_config(AutoConfig.for_model(model_type, **settings)).eval()


class LabelEncoderModule(nn.Module):
    """``labels_encoder.model``: the Hugging Face encoder under gliner's state-dict name."""

    def __init__(self, config: dict[str, Any]) -> None:
        super().__init__()
        self.model = hf_encoder(config)

    def train(self, mode: bool = True) -> LabelEncoderModule:
        """Always in inference mode (a Hugging Face model's dropout follows ``training``)."""
        return super().train(False)


def pad_ids(ids: Sequence[Sequence[int]], pad: int, device: torch.device):
    """Right-padded ``[n, longest]`` ids and their 0/1 attention mask, built on the host and
    copied once."""
    longest = max(len(row) for row in ids)
    flat = torch.full((2, len(ids), longest), 0, dtype=torch.long)
    flat[0].fill_(pad)
    for row, values in enumerate(ids):
        flat[0, row, : len(values)] = torch.tensor(values, dtype=torch.long)
        flat[1, row, : len(values)] = 1
    flat = flat.to(device, non_blocking=device.type == "cuda")
    return flat[0], flat[1]


def mean_pool(tokens: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """gliner's label pooling: masked mean in float32 (its mask is a float tensor)."""
    weights = mask.unsqueeze(-1).float()
    return (tokens * weights).sum(1) / weights.sum(1).clamp(min=1e-9)


class LabelVectorCache:
    """Label token ids -> final label vector, least recently used first out."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._vectors: OrderedDict[bytes, torch.Tensor] = OrderedDict()
        self.hits = self.misses = self.evictions = 0
        self._reported = (0, 0, 0)
        self._last_report = time.monotonic()
        self.shared = SharedCounters(STATS_NAME, self.stats)  # -> the API server's /metrics

    def __len__(self) -> int:
        return len(self._vectors)

    @staticmethod
    def key(ids: Sequence[int]) -> bytes:
        return torch.tensor(list(ids), dtype=torch.int64).numpy().tobytes()

    def vectors(
        self,
        labels: Sequence[Sequence[int]],
        encode: Callable[[list[Sequence[int]]], torch.Tensor],
    ) -> torch.Tensor:
        """``[len(labels), width]``: cached rows where present, ``encode`` for the rest (one
        call for all misses of the step); repeated labels are encoded once."""
        keys = [self.key(ids) for ids in labels]
        missing: dict[bytes, int] = {}  # key -> its row in ``unique``
        unique: list[Sequence[int]] = []
        for key, ids in zip(keys, labels):
            if key in self._vectors:
                self._vectors.move_to_end(key)
                self.hits += 1
            elif key not in missing:
                missing[key] = len(unique)
                unique.append(ids)
                self.misses += 1
            else:
                self.hits += 1  # a repeat within the step: encoded once
        fresh = encode(unique) if unique else None
        rows = [
            fresh[missing[key]] if key in missing else self._vectors[key]  # type: ignore[index]
            for key in keys
        ]
        if fresh is not None and self.capacity:
            for key, index in missing.items():
                self._vectors[key] = fresh[index]
            while len(self._vectors) > self.capacity:
                self._vectors.popitem(last=False)
                self.evictions += 1
        self.shared.changed()
        self._maybe_report()
        return torch.stack(rows)

    def stats(self) -> dict[str, int]:
        return {
            "hits": self.hits,
            "misses": self.misses,
            "evictions": self.evictions,
            "size": len(self._vectors),
            "capacity": self.capacity,
        }

    def _maybe_report(self) -> None:
        now = time.monotonic()
        counts = (self.hits, self.misses, self.evictions)
        if counts == self._reported or now - self._last_report < REPORT_EVERY:
            return
        self._reported, self._last_report = counts, now
        total = self.hits + self.misses
        logger.info(
            "GLiNER label cache: %d hits, %d misses (hit rate %.1f%%), %d evictions, "
            "%d of %d vectors held",
            self.hits, self.misses, 100.0 * self.hits / max(total, 1), self.evictions,
            len(self._vectors), self.capacity,
        )  # fmt: skip


def encode_labels(
    encoder: nn.Module,
    projection: nn.Module | None,
    ids: Sequence[Sequence[int]],
    pad_id: int,
    device: torch.device,
) -> torch.Tensor:
    """Pooled label embeddings ``[len(ids), width]`` (float32), ``ENCODE_BATCH`` at a time:
    encoder -> (projection) -> masked mean, as gliner's ``BiEncoder.encode_labels``."""
    out = []
    for start in range(0, len(ids), ENCODE_BATCH):
        input_ids, mask = pad_ids(ids[start : start + ENCODE_BATCH], pad_id, device)
        tokens = encoder(input_ids=input_ids, attention_mask=mask)[0]
        if projection is not None:
            tokens = projection(tokens)
        out.append(mean_pool(tokens, mask))
    return torch.cat(out)


def label_ids_for(
    extra: Any, vocab_size: int | None = None, max_tokens: int | None = None
) -> list[list[int]] | None:
    """The label token ids the IOProcessor attached to a request, or None (vLLM's start-up
    dummy runs, a request that bypassed the IOProcessor, malformed values, ids the label
    encoder cannot take: at or past ``vocab_size``, more than ``max_tokens`` per label);
    never raises."""
    values = extra.get(LABELS_KEY) if extra else None
    if not isinstance(values, (list, tuple)) or not values:
        return None
    labels: list[list[int]] = []
    for ids in values:
        if not isinstance(ids, (list, tuple)) or not ids:
            return None
        if max_tokens is not None and len(ids) > max_tokens:
            return None
        if not all(isinstance(v, int) and 0 <= v < (vocab_size or v + 1) for v in ids):
            return None
        labels.append([int(v) for v in ids])
    return labels
