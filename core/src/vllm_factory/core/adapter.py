"""The only code that implements vLLM's pooler interface.

``VllmPoolerAdapter`` wraps a ``FactoryPooler``: it cuts vLLM's flat hidden-state batch into
one tensor per sequence, gathers the per-request data the head asked for, and returns the
head's outputs in vLLM's ``PoolerOutput`` form.
"""

from __future__ import annotations

from collections.abc import Iterable
from collections.abc import Set as AbstractSet

import torch
from vllm_factory.core import compat
from vllm_factory.core.pooler import FactoryPooler, PoolerRequest

# "plugin" serves IOProcessor requests; "token_embed" lets vLLM's own endpoints
# (/pooling without a plugin, late-interaction /score) use the same head.
DEFAULT_TASKS: tuple[str, ...] = ("plugin", "token_embed")


class VllmPoolerAdapter(compat.Pooler):
    def __init__(self, head: FactoryPooler, tasks: Iterable[str] = DEFAULT_TASKS) -> None:
        super().__init__()
        self.head = head
        self._tasks = frozenset(tasks)

    def get_supported_tasks(self) -> AbstractSet[str]:
        return set(self._tasks)

    def get_pooling_updates(self, task: str) -> compat.PoolingParamsUpdate:
        return compat.PoolingParamsUpdate(requires_token_ids=self.head.needs_token_ids)

    def forward(
        self,
        hidden_states: torch.Tensor,
        pooling_metadata: compat.PoolingMetadata,
    ) -> list[torch.Tensor]:
        sizes = compat.scheduled_token_counts(pooling_metadata)
        if not sizes:
            return []
        per_sequence = list(torch.split(hidden_states, sizes))
        if self.head.needs_token_ids:
            token_ids: list[torch.Tensor | None] = list(
                compat.prompt_token_ids_cpu(pooling_metadata)
            )
        else:
            token_ids = [None] * len(sizes)
        requests = [
            PoolerRequest(token_ids=ids, extra=params.extra_kwargs or {})
            for ids, params in zip(token_ids, pooling_metadata.pooling_params)
        ]
        return self.head(per_sequence, requests)
