"""A single-process vLLM context: the parallel layers need a TP group and a current config."""

from vllm_factory.testing.vllm_context import finish_loading, vllm_context

__all__ = ["finish_loading", "vllm_context"]
