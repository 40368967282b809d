"""Triton kernels with PyTorch fallbacks for the encoders served by vLLM Factory.

Each public function takes a keyword-only ``backend`` (``"auto"``, ``"triton"`` or ``"torch"``).
``"auto"`` runs Triton for CUDA tensors when Triton imports, and the PyTorch fallback otherwise;
``VLLM_FACTORY_DISABLE_TRITON=1`` makes ``"auto"`` always pick the fallback.
"""

from ._dispatch import select_backend, triton_available, triton_disabled
from .deberta_attention import (
    flash_deberta_attention,
    relative_position_index,
    relative_scores,
)
from .geglu import fused_geglu
from .layernorm import RMSNorm, RMSOptions, fused_add_layernorm, fused_layernorm, fused_rmsnorm
from .lstm import bidirectional_lstm
from .rope import build_rope_cache, fused_rope
from .rows_attention import (
    ROWS_OP,
    attention_by_rows,
    in_graph_attention_chosen,
    in_graph_attention_switched,
    sequence_bounds,
    visible_ends,
    window_bounds,
)
from .span_logits import span_logits
from .version import __version__

__all__ = [
    "ROWS_OP",
    "RMSNorm",
    "RMSOptions",
    "__version__",
    "attention_by_rows",
    "bidirectional_lstm",
    "build_rope_cache",
    "flash_deberta_attention",
    "fused_add_layernorm",
    "fused_geglu",
    "fused_layernorm",
    "fused_rmsnorm",
    "fused_rope",
    "in_graph_attention_chosen",
    "in_graph_attention_switched",
    "relative_position_index",
    "relative_scores",
    "select_backend",
    "sequence_bounds",
    "span_logits",
    "triton_available",
    "triton_disabled",
    "visible_ends",
    "window_bounds",
]
