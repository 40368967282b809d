"""Checkpoint tensors into a module's parameters by name: the one loop every encoder uses.

Names may carry a ``model.`` prefix (some exports keep the wrapper's); a tensor the module has
no parameter for (an MLM or LM head, say) is passed over; a parameter with a ``weight_loader``
(vLLM's parallel layers) loads through it, any other is copied after a shape check. Pure torch.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

import torch
from torch import nn

logger = logging.getLogger(__name__)


def copy_weight(param: torch.Tensor, tensor: torch.Tensor, name: str = "") -> None:
    """``param <- tensor`` (cast to the parameter's dtype), refusing a shape mismatch."""
    if param.shape != tensor.shape:
        raise ValueError(f"{name}: checkpoint {tuple(tensor.shape)} vs {tuple(param.shape)}")
    with torch.no_grad():
        param.copy_(tensor.to(param.dtype))


def load_by_name(
    module: nn.Module, weights: Iterable[tuple[str, torch.Tensor]], strict: bool = False
) -> set[str]:
    """Load ``(name, tensor)`` pairs into ``module``'s parameters; the names loaded.
    ``strict``: every parameter must be in the checkpoint."""
    params = dict(module.named_parameters())
    loaded: set[str] = set()
    for name, tensor in weights:
        name = name.removeprefix("model.")
        param = params.get(name)
        if param is None:
            logger.debug("passing over checkpoint tensor %s (no such parameter)", name)
            continue
        loader = getattr(param, "weight_loader", None)
        if loader is not None:
            loader(param, tensor)
        else:
            copy_weight(param, tensor, name)
        loaded.add(name)
    missing = set(params) - loaded
    if strict and missing:
        raise ValueError(f"checkpoint lacks {sorted(missing)[:5]} ({len(missing)} missing)")
    return loaded
