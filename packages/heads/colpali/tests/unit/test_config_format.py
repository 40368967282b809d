"""``--config-format colpali``: colpali-engine's config served with our architecture."""

import json

import pytest
from vllm_factory.core.config_format import Target
from vllm_factory.heads.colpali.config_format import served_config

TARGETS = {"qwen3_vl": Target("ColQwen3ForRetrieval", "colqwen3_io", "pkg")}
CONFIG = {"model_type": "qwen3_vl", "architectures": ["ColQwen3"], "text_config": {"a": 1}}


def test_colpali_config_gets_our_architecture_and_io_processor(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps(CONFIG))
    config = served_config(str(tmp_path), targets=TARGETS)
    assert config["architectures"] == ["ColQwen3ForRetrieval"]
    assert config["io_processor_plugin"] == "colqwen3_io"
    assert config["text_config"] == {"a": 1} and config["model_type"] == "qwen3_vl"


def test_unserved_backbones_and_missing_configs_are_refused(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({**CONFIG, "model_type": "lfm2_vl"}))
    with pytest.raises(ValueError, match="model_type 'lfm2_vl'.*installed: qwen3_vl"):
        served_config(str(tmp_path), targets=TARGETS)
    with pytest.raises(ValueError, match="no config.json"):
        served_config(str(tmp_path / "none"), targets=TARGETS)
