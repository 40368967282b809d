"""Checkpoint tensors into a module's parameters by name: the one loop every encoder uses.

Names may carry a ``model.`` prefix (some exports keep the wrapper's); a tensor the module has
no parameter for (an MLM or LM head, say) is passed over; a parameter with a ``weight_loader``
(vLLM's parallel layers) loads through it, any other is copied after a shape check. Pure torch.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator, Sequence

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


def stack_tensors(
    weights: Iterable[tuple[str, torch.Tensor]], stacked: str, parts: Sequence[str]
) -> Iterator[tuple[str, torch.Tensor]]:
    """``weights`` with the tensors ``<prefix>.<part>.<suffix>`` of all ``parts`` (a layer's
    ``q_proj`` / ``k_proj`` / ``v_proj`` weights, say) concatenated along dim 0, in ``parts``
    order, into ``<prefix>.<stacked>.<suffix>``: a module then runs one matmul where the
    checkpoint has several. Other tensors pass through; a group left incomplete is an error."""
    pending: dict[tuple[str, str], dict[str, torch.Tensor]] = {}
    for name, tensor in weights:
        pieces = name.split(".")
        index = next((i for i, piece in enumerate(pieces) if piece in parts), None)
        if index is None:
            yield name, tensor
            continue
        key = (".".join(pieces[:index]), ".".join(pieces[index + 1 :]))
        group = pending.setdefault(key, {})
        group[pieces[index]] = tensor
        if len(group) == len(parts):
            del pending[key]
            prefix, suffix = key
            fused = ".".join(piece for piece in (prefix, stacked, suffix) if piece)
            yield fused, torch.cat([group[part] for part in parts], dim=0)
    for (prefix, suffix), group in pending.items():
        missing = [f"{prefix}.{part}.{suffix}" for part in parts if part not in group]
        raise ValueError(f"checkpoint lacks {missing} (stacked into {stacked})")
