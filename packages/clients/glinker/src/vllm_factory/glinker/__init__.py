"""glinker pipelines on a vLLM Factory server: :func:`register` adds glinker processors whose
GLiNER model is a :class:`~vllm_factory.glinker.served.ServedGLiNER` (the client alone needs
no glinker)::

    from vllm_factory.glinker import register
    register()  # l1_gliner_vllm, l3_vllm, l4_vllm

=================  ==================  ============================================
glinker processor  served counterpart  config keys added
=================  ==================  ============================================
``l1_gliner``      ``l1_gliner_vllm``  ``url`` (``model``: the served model name)
``l3_batch``       ``l3_vllm``         ``url`` (``model_name``: the served model)
``l4_reranker``    ``l4_vllm``         ``url`` (``model_name``: the served model)
=================  ==================  ============================================

Everything else (label templates, thresholds, input spans from L1, chunking, filtering,
ordering) is glinker's own processor code; only the model call goes to the server. A YAML
pipeline switches by renaming the processor and adding ``url``. The served bi-encoder keeps
its label embeddings in the server (cached by content), so ``use_precomputed_embeddings`` and
``cache_embeddings`` have nothing to do here.
"""

from __future__ import annotations

from vllm_factory.glinker.served import ServedGLiNER, ServerError
from vllm_factory.glinker.version import __version__

SUPPORTED_GLINKER = (">=0.1.1", "<0.2")


def _check_glinker() -> None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        found = version("glinker")
    except PackageNotFoundError:
        raise ImportError(
            "vllm_factory.glinker needs glinker: pip install 'vllm-factory-glinker[glinker]'"
        ) from None
    parts = tuple(int(p) for p in found.split(".")[:2] if p.isdigit())
    if not (0, 1) <= parts < (0, 2):
        raise ImportError(
            f"vllm_factory.glinker supports glinker {','.join(SUPPORTED_GLINKER)}; found {found}"
        )


def register() -> list[str]:
    """Register the served processors in glinker's registry (idempotent); their names."""
    _check_glinker()
    from vllm_factory.glinker.processors import register as register_processors

    return register_processors()


__all__ = ["ServedGLiNER", "ServerError", "__version__", "register"]
