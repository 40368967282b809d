"""Entry points: vLLM calls these at start-up in every process (what they register is
declared in the package module)."""

from vllm_factory.core.registration import entry_points

register, io_processor = entry_points(__package__)
