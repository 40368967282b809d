"""What vLLM asks of every vllm-factory pooling model, written once.

A package's model class subclasses :class:`FactoryModel` (with vLLM's pooling-type decorator,
through :mod:`vllm_factory.core.compat`), sets ``self.model`` (a packed encoder: ``[T]`` token
ids and ``[T]`` positions in, ``[T, hidden]`` out, with ``embed_input_ids``) and
``self.pooler`` (a :class:`~vllm_factory.core.adapter.VllmPoolerAdapter`), and overrides
:meth:`encode` only when the encoder needs more than ids and positions.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn
from vllm_factory.core.checkpoint import CheckpointFiles


class FactoryModel(nn.Module):
    is_pooling_model = True
    model: nn.Module

    def __init__(self, vllm_config: Any = None) -> None:
        """With vLLM's config: ``self.model_config`` and ``self.files`` (the checkpoint's own
        files, for what vLLM does not load: settings, head weights)."""
        super().__init__()
        if vllm_config is not None:
            self.model_config = vllm_config.model_config
            revision = getattr(self.model_config, "revision", None)
            self.files = CheckpointFiles(self.model_config.model, revision)

    def embed_input_ids(self, input_ids: torch.Tensor) -> torch.Tensor:
        return self.model.embed_input_ids(input_ids)

    def forward(
        self,
        input_ids: torch.Tensor,
        positions: torch.Tensor,
        intermediate_tensors: Any = None,
        inputs_embeds: torch.Tensor | None = None,
    ) -> torch.Tensor:
        return self.encode(input_ids, positions)

    def encode(self, input_ids: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        """The packed batch's hidden states ``[T, hidden]``."""
        return self.model(input_ids, positions)
