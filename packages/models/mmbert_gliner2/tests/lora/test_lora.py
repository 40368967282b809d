"""Per-request LoRA adapters served vs gliner2's ``load_adapter`` (the family suite:
:mod:`vllm_factory.testing.gliner2.lora`)."""

from vllm_factory.testing.gliner2.lora import *
