"""The task-head contract: pure torch, no vLLM import.

A model package implements its head (ColBERT projection, GLiNER span scorer, ...) as a
``FactoryPooler``. vLLM never sees it directly: ``VllmPoolerAdapter`` feeds it one hidden
state tensor per finished sequence together with the small per-request data the IOProcessor
attached, and hands its outputs back to vLLM.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import torch
from torch import nn


@dataclass(frozen=True)
class PoolerRequest:
    """What a pooler knows about one sequence besides its hidden states."""

    # Prompt token ids on the CPU; set only when the pooler declares ``needs_token_ids``.
    token_ids: torch.Tensor | None = None
    # Small, msgpack-friendly per-request values (ints, bools, short lists) that the
    # IOProcessor put into ``PoolingParams.extra_kwargs``.
    extra: Mapping[str, Any] = field(default_factory=dict)


class FactoryPooler(nn.Module, ABC):
    """A task head that turns per-sequence hidden states into per-sequence outputs."""

    # Ask the adapter for the prompt token ids of each sequence (costs a host copy).
    needs_token_ids: ClassVar[bool] = False

    @abstractmethod
    def forward(
        self, hidden_states: Sequence[torch.Tensor], requests: Sequence[PoolerRequest]
    ) -> list[torch.Tensor]:
        """Map ``hidden_states[i]`` of shape ``[num_tokens_i, hidden]`` to one tensor each.
        Never called for an empty step (the adapter answers it).

        The returned tensors must own their storage (no views into ``hidden_states``):
        the engine may reuse the hidden-state buffer for the next step.
        """
