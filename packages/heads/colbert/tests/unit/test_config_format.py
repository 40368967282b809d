import pytest
from test_settings import st_checkpoint, write
from vllm_factory.core.config_format import Target
from vllm_factory.heads.colbert.config_format import served_config
from vllm_factory.heads.colbert.settings import UnsupportedColBERTConfig

TARGETS = {"modernbert": Target("ModernColBERTForRetrieval", "moderncolbert_io", "pkg")}
BACKBONE = {"model_type": "modernbert", "architectures": ["ModernBertModel"], "hidden_size": 8}


def test_backbone_config_gets_our_architecture_and_io_processor(tmp_path):
    st_checkpoint(tmp_path)
    write(tmp_path, {"config.json": BACKBONE})
    config = served_config(str(tmp_path), targets=TARGETS)
    assert config["architectures"] == ["ModernColBERTForRetrieval"]
    assert config["io_processor_plugin"] == "moderncolbert_io"
    assert config["hidden_size"] == 8 and config["model_type"] == "modernbert"


def test_unserved_backbone_and_unsupported_settings_are_refused(tmp_path):
    st_checkpoint(tmp_path / "a")
    write(tmp_path / "a", {"config.json": {**BACKBONE, "model_type": "bert"}})
    with pytest.raises(ValueError, match="model_type 'bert'.*installed: modernbert"):
        served_config(str(tmp_path / "a"), targets=TARGETS)
    st_checkpoint(tmp_path / "b", mask={"keep_only_token_ids": [3]})
    write(tmp_path / "b", {"config.json": BACKBONE})
    with pytest.raises(UnsupportedColBERTConfig, match="keep_only_token_ids"):
        served_config(str(tmp_path / "b"), targets=TARGETS)
    with pytest.raises(ValueError, match="no config.json"):
        served_config(str(tmp_path / "c"), targets=TARGETS)
