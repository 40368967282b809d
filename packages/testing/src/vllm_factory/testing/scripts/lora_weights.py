"""Seeded LoRA factors for the testing kit's adapters (``gliner_adapter.py``,
``gliner2_adapter.py``; runs in their reference venvs, beside PEFT).

PEFT starts ``lora_B`` at zero, so a fresh adapter changes nothing: every LoRA layer gets
drawn factors instead, ``lora_A`` rows ~ N(0, 1 / in) and ``lora_B`` ~ N(0, B_STD^2), in the
layers' name order from one seeded generator. With the alpha / rank scaling the update is a
modest fraction of the tiny encoders' own weights (drawn with std 0.1 - 0.3).
"""

from __future__ import annotations

import torch

B_STD = 0.05


def draw_lora_factors(peft_model: torch.nn.Module, seed: int) -> int:
    """Draw every LoRA factor of ``peft_model`` (in place); returns how many layers have one."""
    generator = torch.Generator().manual_seed(seed)
    layers = 0
    for _, module in sorted(peft_model.named_modules(), key=lambda item: item[0]):
        if not (hasattr(module, "lora_A") and hasattr(module, "lora_B")):
            continue
        for key in module.lora_A:
            a, b = module.lora_A[key].weight, module.lora_B[key].weight
            with torch.no_grad():
                a.copy_(torch.randn(a.shape, generator=generator) / a.shape[1] ** 0.5)
                b.copy_(torch.randn(b.shape, generator=generator) * B_STD)
            layers += 1
    return layers
