"""gliner2's legacy LoRA adapters, converted to PEFT's layout (what vLLM's ``--lora-modules``
and ``/v1/load_lora_adapter`` read).

gliner2 2.1 saves adapters with PEFT (``apply_lora(...)`` then ``save_pretrained``):
``adapter_config.json`` with ``peft_type`` + ``adapter_model.safetensors``, served as they are.
gliner2's layout from before PEFT, which 2.1 still writes through its legacy
``gliner2.training.lora.save_lora_adapter`` and ``GLiNER2.load_adapter`` still reads:
``adapter_config.json`` (``lora_r``, ``lora_alpha``, ``lora_dropout``, ``target_modules`` as
target groups such as ``"encoder"``, no ``peft_type``) and ``adapter_weights.safetensors``
(``<module>.lora_A`` / ``<module>.lora_B`` per adapted ``Linear``, named as in the library's
state dict).

:func:`convert_legacy_adapter` writes the same adapter in PEFT's layout, every weight as it
is (``base_model.model.<module>.lora_A.weight``), ``target_modules`` the adapted modules:
``vllm-factory-prep --model LEGACY_DIR --output OUT`` (this package's preparer) runs it. The
server adapts only the encoder (vLLM's LoRA wraps its parallel layers, not the heads): an
adapter with a head module is refused here, naming it.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

ADAPTER_CONFIG = "adapter_config.json"
LEGACY_WEIGHTS = "adapter_weights.safetensors"
PEFT_WEIGHTS = "adapter_model.safetensors"
PEFT_PREFIX = "base_model.model."
ENCODER_PREFIX = "encoder."
MATRICES = ("lora_A", "lora_B")

logger = logging.getLogger("vllm_factory.prep")


class AdapterError(ValueError):
    """The adapter cannot be converted; the message says why."""


def _config(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads((path / ADAPTER_CONFIG).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def is_legacy_adapter(path: Path) -> bool:
    """Whether ``path`` holds a gliner2 adapter in the library's own (pre-PEFT) layout."""
    config = _config(path)
    return config is not None and "peft_type" not in config and (path / LEGACY_WEIGHTS).is_file()


def peft_adapter(config: dict[str, Any], weights: dict[str, Any]) -> tuple[dict, dict]:
    """The PEFT ``adapter_config.json`` data and ``adapter_model.safetensors`` tensors of a
    legacy adapter (its ``adapter_config.json`` data and its weights by name)."""
    modules: dict[str, dict[str, Any]] = {}
    for name, tensor in weights.items():
        module, _, matrix = name.rpartition(".")
        if matrix not in MATRICES or not module:
            raise AdapterError(f"{LEGACY_WEIGHTS}: {name!r} is not <module>.lora_A / .lora_B")
        modules.setdefault(module, {})[matrix] = tensor
    if not modules:
        raise AdapterError(f"{LEGACY_WEIGHTS} holds no LoRA weights")
    heads = sorted(m for m in modules if not m.startswith(ENCODER_PREFIX))
    if heads:
        raise AdapterError(
            f"the adapter adapts {', '.join(heads)}: the server adapts only the encoder "
            f"(modules under {ENCODER_PREFIX!r})"
        )
    rank = config.get("lora_r")
    for module, pair in sorted(modules.items()):
        if set(pair) != set(MATRICES):
            raise AdapterError(f"{module}: {LEGACY_WEIGHTS} holds {sorted(pair)}, not both")
        a, b = pair["lora_A"], pair["lora_B"]
        if a.ndim != 2 or b.ndim != 2 or a.shape[0] != b.shape[1] or a.shape[0] != rank:
            raise AdapterError(
                f"{module}: lora_A {tuple(a.shape)} and lora_B {tuple(b.shape)} do not make a "
                f"rank-{rank} update (adapter_config.json lora_r)"
            )
    peft_config = {
        "peft_type": "LORA",
        "r": rank,
        "lora_alpha": config.get("lora_alpha", 16.0),
        "lora_dropout": config.get("lora_dropout", 0.0),
        "target_modules": sorted(modules),
        "bias": "none",
        "use_rslora": False,
        "use_dora": False,
        "modules_to_save": None,
        "task_type": None,
        "inference_mode": True,
    }
    tensors = {
        f"{PEFT_PREFIX}{module}.{matrix}.weight": pair[matrix].contiguous()
        for module, pair in sorted(modules.items())
        for matrix in MATRICES
    }
    return peft_config, tensors


def convert_legacy_adapter(source: Path, out: Path) -> Path:
    """Write ``source`` (a legacy gliner2 adapter) to ``out`` in PEFT's layout."""
    from safetensors.torch import load_file, save_file

    config = _config(source)
    if config is None or not (source / LEGACY_WEIGHTS).is_file():
        raise AdapterError(f"{source} has no {ADAPTER_CONFIG} + {LEGACY_WEIGHTS}")
    if not isinstance(config.get("lora_r"), int) or config["lora_r"] < 1:
        raise AdapterError(f"{source / ADAPTER_CONFIG}: lora_r must be a positive integer")
    peft_config, tensors = peft_adapter(config, load_file(str(source / LEGACY_WEIGHTS)))
    out.mkdir(parents=True, exist_ok=True)
    save_file(tensors, str(out / PEFT_WEIGHTS))
    (out / ADAPTER_CONFIG).write_text(json.dumps(peft_config, indent=2) + "\n", encoding="utf-8")
    logger.info(
        "converted %s: %d modules, rank %d, alpha %s (PEFT layout)",
        out, len(peft_config["target_modules"]), peft_config["r"], peft_config["lora_alpha"],
    )  # fmt: skip
    return out
