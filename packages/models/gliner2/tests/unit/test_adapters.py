"""gliner2's legacy LoRA adapters to PEFT's layout (``adapters.peft_adapter``), and the
preparer recognizing them. No vLLM; the conversion on a real gliner2 adapter, served, is in
``tests/lora``."""

from __future__ import annotations

import json

import pytest
import torch
from vllm_factory.models.gliner2.adapters import AdapterError, is_legacy_adapter, peft_adapter
from vllm_factory.models.gliner2.prep import GLINER2

QUERY = "encoder.encoder.layer.0.attention.self.query_proj"
DENSE = "encoder.encoder.layer.1.output.dense"
CONFIG = {"adapter_type": "lora", "adapter_version": "1.0", "lora_r": 4, "lora_alpha": 8.0,
          "lora_dropout": 0.0, "target_modules": ["encoder"]}  # fmt: skip


def legacy_weights() -> dict[str, torch.Tensor]:
    return {f"{QUERY}.lora_A": torch.randn(4, 32), f"{QUERY}.lora_B": torch.randn(32, 4),
            f"{DENSE}.lora_A": torch.randn(4, 64), f"{DENSE}.lora_B": torch.randn(32, 4)}  # fmt: skip


def test_weights_kept_under_peft_names():
    weights = legacy_weights()
    config, tensors = peft_adapter(CONFIG, weights)
    assert config["peft_type"] == "LORA" and config["r"] == 4 and config["lora_alpha"] == 8.0
    assert config["target_modules"] == [QUERY, DENSE]
    assert set(tensors) == {f"base_model.model.{name}.weight" for name in weights}
    for name, tensor in weights.items():
        assert torch.equal(tensors[f"base_model.model.{name}.weight"], tensor)


def test_refusals_name_the_module():
    weights = {**legacy_weights(), "classifier.0.lora_A": torch.randn(4, 32),
               "classifier.0.lora_B": torch.randn(64, 4)}  # fmt: skip
    with pytest.raises(AdapterError, match=r"classifier\.0: the server adapts only the encoder"):
        peft_adapter(CONFIG, weights)
    weights = legacy_weights()
    del weights[f"{DENSE}.lora_B"]
    with pytest.raises(AdapterError, match=f"{DENSE}: .* not both"):
        peft_adapter(CONFIG, weights)
    with pytest.raises(AdapterError, match="rank-8"):
        peft_adapter({**CONFIG, "lora_r": 8}, legacy_weights())
    with pytest.raises(AdapterError, match="not <module>.lora_A"):
        peft_adapter(CONFIG, {"x.weight": torch.zeros(1)})


def test_preparer_recognizes_legacy_adapters_only(tmp_path):
    legacy = tmp_path / "legacy"
    legacy.mkdir()
    (legacy / "adapter_config.json").write_text(json.dumps(CONFIG))
    (legacy / "adapter_weights.safetensors").write_bytes(b"")
    assert is_legacy_adapter(legacy) and GLINER2.recognizes(legacy)
    peft = tmp_path / "peft"  # already PEFT's layout: served as it is, nothing to prepare
    peft.mkdir()
    (peft / "adapter_config.json").write_text(json.dumps({"peft_type": "LORA", "r": 4}))
    (peft / "adapter_model.safetensors").write_bytes(b"")
    assert not is_legacy_adapter(peft) and not GLINER2.recognizes(peft)
