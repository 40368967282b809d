"""Per-request LoRA adapters served vs gliner with the same PEFT adapter on its encoder (the
family suite: :mod:`vllm_factory.testing.gliner.lora`)."""

from vllm_factory.testing.gliner.lora import *
