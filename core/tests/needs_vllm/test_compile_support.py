"""What compiled encoders with split-point ops of their own rely on (``compat``)."""

import torch
from vllm_factory.core import compat


def _config(mode=None):
    from vllm.config import CompilationConfig, CompilationMode, VllmConfig

    return VllmConfig(compilation_config=CompilationConfig(mode=mode or CompilationMode.NONE))


def test_split_graph_at_adds_each_op_once():
    config = _config()
    config.compilation_config.splitting_ops = ["vllm::unified_attention"]
    compat.split_graph_at(config, "vllm_factory::probe")
    compat.split_graph_at(config, "vllm_factory::probe")
    assert config.compilation_config.splitting_ops == [
        "vllm::unified_attention",
        "vllm_factory::probe",
    ]


def test_compile_key_takes_our_settings_and_keeps_the_users():
    config = _config()
    config.additional_config = {"user": 1}
    before = config.compute_hash()
    compat.add_compile_key(config, probe_attention="rows")
    compat.add_compile_key(config, probe_kernels=True)
    assert config.additional_config == {
        "user": 1,
        "vllm_factory": {"probe_attention": "rows", "probe_kernels": True},
    }
    keyed = config.compute_hash()
    compat.add_compile_key(config, probe_attention="split")
    assert len({before, keyed, config.compute_hash()}) == 3


def test_compile_key_leaves_a_platforms_config_object_alone(caplog):
    class PlatformConfig:
        def compute_hash(self) -> str:
            return "platform"

    holder = type("Config", (), {"additional_config": PlatformConfig()})()
    compat.add_compile_key(holder, probe_attention="rows")
    assert "probe_attention" in caplog.text


def test_compiles_only_inside_an_engine():
    # A config without a model: an encoder built by hand, as in unit tests.
    assert not compat.compiles_in_engine(_config())


def test_step_cache_builds_once_per_step_and_per_positions():
    """Every layer's split-point op asks for the layout; inside one model step (one vLLM
    forward context) it is built once per positions tensor, and anew in the next step."""
    from vllm.forward_context import set_forward_context

    builds = []

    def build():
        builds.append(1)
        return len(builds)

    positions = torch.tensor([0, 1, 2, 0, 1])
    other = torch.tensor([0, 0, 1])
    config = _config()
    with set_forward_context(None, config):
        first = [compat.step_cached("probe", positions, build) for _ in range(4)]
        assert first == [1, 1, 1, 1]
        assert compat.step_cached("probe", other, build) == 2
        assert compat.step_cached("other-key", positions, build) == 3
    with set_forward_context(None, config):
        assert compat.step_cached("probe", positions, build) == 4
    # Outside a step nothing is cached.
    assert compat.step_cached("probe", positions, build) == 5
    assert compat.step_cached("probe", positions, build) == 6


def test_quantization_is_refused_in_one_line_naming_the_encoder():
    """An encoder built without vLLM's quantization config would serve unquantized weights
    under ``--quantization``: it refuses at start-up instead."""
    import pytest
    from vllm.model_executor.layers.quantization.fp8 import Fp8Config

    config = _config()
    compat.refuse_quantization(config, "Probe")  # no quantization: nothing to refuse
    config.quant_config = Fp8Config(is_checkpoint_fp8_serialized=True)
    with pytest.raises(ValueError, match=r"the Probe encoder does not apply quantization \(fp8\)"):
        compat.refuse_quantization(config, "Probe")


def test_a_checkpoint_saved_quantized_is_refused_in_one_line():
    """Online quantization reaches the encoders' layers; a checkpoint saved quantized carries
    scales that the encoders' weight loaders do not map, so it is refused at start-up."""
    from types import SimpleNamespace

    import pytest
    from vllm.model_executor.layers.quantization.fp8 import Fp8Config

    quant = Fp8Config(is_checkpoint_fp8_serialized=True)
    online = SimpleNamespace(
        quant_config=quant, model_config=SimpleNamespace(hf_config=SimpleNamespace())
    )
    assert compat.quant_config(online) is quant
    saved = SimpleNamespace(
        quant_config=quant,
        model_config=SimpleNamespace(
            hf_config=SimpleNamespace(quantization_config={"quant_method": "fp8"})
        ),
    )
    with pytest.raises(ValueError, match="checkpoints saved quantized are not supported"):
        compat.quant_config(saved)
