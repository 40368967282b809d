"""Checkpoint tensors into a module's parameters by name: the one loop every backbone uses.

A name may stand bare or behind one of the caller's prefixes (``model.`` by default: some
exports keep the wrapper's); a backbone whose names differ from the checkpoint's passes a
``rename`` (name -> parameter name and shard, or ``None`` to pass the tensor over). A tensor the
module has no parameter for (an MLM or LM head, a task head) is passed over; a parameter with a
``weight_loader`` (vLLM's parallel layers) loads through it, any other is copied after a shape
check. Parameters the checkpoint lacks are an error with ``strict``, else a warning. Pure torch.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator, Sequence

import torch
from torch import nn

logger = logging.getLogger(__name__)


def copy_weight(param: torch.Tensor, tensor: torch.Tensor, name: str = "") -> None:
    """``param <- tensor`` (cast to the parameter's dtype), refusing a shape mismatch."""
    if param.shape != tensor.shape:
        raise ValueError(f"{name}: checkpoint {tuple(tensor.shape)} vs {tuple(param.shape)}")
    with torch.no_grad():
        param.copy_(tensor.to(param.dtype))


# A checkpoint name (prefix removed) -> our parameter name and the shard it fills (``None``: the
# whole parameter), or ``None`` for a tensor the module does not use.
Rename = Callable[[str], "tuple[str, str | int | None] | None"]


def load_by_name(
    module: nn.Module,
    weights: Iterable[tuple[str, torch.Tensor]],
    strict: bool = False,
    *,
    prefixes: Sequence[str] = ("model.",),
    rename: Rename | None = None,
) -> set[str]:
    """Load ``(name, tensor)`` pairs into ``module``'s parameters; the names loaded.

    Each name is tried bare, then behind each of ``prefixes`` in turn (the first that leads to
    a parameter wins); ``rename`` maps what is left to a parameter name and shard id (passed
    to the parameter's ``weight_loader``). ``strict``: every parameter must be in the
    checkpoint (else missing ones are logged)."""
    params = dict(module.named_parameters())
    loaded: set[str] = set()
    for name, tensor in weights:
        target = _target(name, params, prefixes, rename)
        if target is None:
            logger.debug("passing over checkpoint tensor %s (no such parameter)", name)
            continue
        local, shard = target
        param = params[local]
        loader = getattr(param, "weight_loader", None)
        if loader is None:
            copy_weight(param, tensor, local)
        elif shard is None:
            loader(param, tensor)
        else:
            loader(param, tensor, shard)
        loaded.add(local)
    missing = set(params) - loaded
    if missing:
        what = f"checkpoint lacks {sorted(missing)[:5]} ({len(missing)} missing)"
        if strict:
            raise ValueError(what)
        logger.warning("%s: %s", type(module).__name__, what)
    return loaded


def _target(
    name: str, params: dict[str, nn.Parameter], prefixes: Sequence[str], rename: Rename | None
) -> tuple[str, str | int | None] | None:
    for candidate in (name, *(name[len(p) :] for p in prefixes if p and name.startswith(p))):
        target = rename(candidate) if rename is not None else (candidate, None)
        if target is not None and target[0] in params:
            return target
    return None


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
