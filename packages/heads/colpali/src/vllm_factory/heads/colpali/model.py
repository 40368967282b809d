"""``ColPaliModel``: the mixin that turns one of vLLM's vision-language models into a ColPali
retriever (every token's hidden state -> projection -> L2 norm), in the spirit of vLLM's own
ColBERT classes: a package writes one thin class,
``class ColQwen3(ColPaliModel, Qwen3VLForConditionalGeneration, SupportsLateInteraction)``
(the mixin first, vLLM's interface last), and names how its reference library saves the
backbone's weights (:attr:`CHECKPOINT_PREFIXES`). A retriever with no projection (its token
vectors are the backbone's hidden states, normalised) sets :attr:`PROJECTION` to False.

The backbone runs exactly as vLLM runs it for generation (its multimodal processor, vision
tower, M-RoPE positions); the language-model head is dropped (a retriever never computes logits,
and colpali-engine's checkpoints do not store it). The projection head is a
:class:`~vllm_factory.heads.colpali.head.ColPaliHead` behind the shared pooler adapter.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any, ClassVar

import torch
from torch import nn
from vllm_factory.core.adapter import VllmPoolerAdapter
from vllm_factory.core.checkpoint import CheckpointFiles
from vllm_factory.heads.colpali.head import (
    ColPaliHead,
    TokenNormHead,
    is_projection_weight,
    read_projection,
)


class ImagesOnly:
    """Processing-info mixin for a document retriever on a vision-language backbone: images
    only. The backbone's other modalities keep their key (its start-up bookkeeping names them)
    with a limit of 0, so that vLLM neither profiles one (a dummy video, which a CPU host
    without torchvision cannot process, once ``--max-model-len`` is long enough to hold one)
    nor accepts one. The IOProcessor sends images and texts only."""

    def get_supported_mm_limits(self) -> dict[str, int | None]:
        limits = super().get_supported_mm_limits()  # type: ignore[misc]
        return {m: (limit if m == "image" else 0) for m, limit in limits.items()}


class ColPaliModel:
    is_pooling_model = True
    # Checkpoint name prefix -> the prefix the backbone class's own ``load_weights`` expects
    # (the reference library may save a bare backbone, without the generation wrapper's names).
    CHECKPOINT_PREFIXES: ClassVar[dict[str, str]] = {}
    # Dotted path of the backbone's language-model head, replaced by an identity.
    LM_HEAD: ClassVar[str] = "language_model.lm_head"
    # Whether the checkpoint has a projection (``custom_text_proj``) after the backbone.
    PROJECTION: ClassVar[bool] = True
    # A torch file of the checkpoint holding the projection, for a library that saves it apart
    # from the safetensors (read where these hold none; ``head.projection_file_tensors``).
    PROJECTION_FILE: ClassVar[str | None] = None
    # The architecture vLLM builds the language model as, from ``text_config.architectures``:
    # set there where the checkpoint's text config names none (Qwen3-VL's and transformers'
    # LFM2-VL configs do not; vLLM 0.28 on the CPU platform then fails with an IndexError).
    TEXT_ARCHITECTURE: ClassVar[str | None] = None

    def __init__(self, *, vllm_config: Any, prefix: str = "model") -> None:
        model_config = vllm_config.model_config
        text_config = model_config.hf_config.get_text_config()
        if self.TEXT_ARCHITECTURE and not getattr(text_config, "architectures", None):
            text_config.architectures = [self.TEXT_ARCHITECTURE]
        super().__init__(vllm_config=vllm_config, prefix=prefix)
        # A projection saved apart from the safetensors, read once here, loaded in load_weights.
        self._file_projection: dict[str, torch.Tensor] | None = None
        hidden = model_config.hf_config.get_text_config().hidden_size
        if not self.PROJECTION:
            head = TokenNormHead(hidden, dtype=model_config.head_dtype)
            self.pooler = VllmPoolerAdapter(head)
        else:
            files = CheckpointFiles(model_config.model, getattr(model_config, "revision", None))
            shape, self._file_projection = read_projection(files, self.PROJECTION_FILE)
            if shape.in_features != hidden:
                raise ValueError(
                    f"{model_config.model}: projection takes {shape.in_features} features, the "
                    f"backbone's hidden size is {hidden}"
                )
            self.pooler = VllmPoolerAdapter(ColPaliHead(shape, dtype=model_config.head_dtype))
        owner, _, name = self.LM_HEAD.rpartition(".")
        setattr(self.get_submodule(owner), name, nn.Identity())

    def checkpoint_name(self, name: str) -> str:
        for old, new in self.CHECKPOINT_PREFIXES.items():
            if name.startswith(old):
                return new + name[len(old) :]
        return name

    def load_weights(self, weights: Iterable[tuple[str, torch.Tensor]]) -> set[str]:
        head: dict[str, torch.Tensor] = {}
        lm_head = self.LM_HEAD.rpartition(".")[2] + "."

        def backbone() -> Iterator[tuple[str, torch.Tensor]]:
            for name, tensor in weights:
                if is_projection_weight(name):
                    head[name.rpartition(".")[2]] = tensor
                elif not name.startswith(lm_head) and f".{lm_head}" not in name:
                    yield self.checkpoint_name(name), tensor

        loaded = set(super().load_weights(backbone()))
        if not head and self._file_projection is not None:
            head, self._file_projection = self._file_projection, None
        loaded |= {f"pooler.head.{n}" for n in self.pooler.head.load_checkpoint_weights(head)}
        return loaded
