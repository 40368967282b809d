"""``--config-format colpali``: colpali-engine's config served with our architecture."""

import json
import sys
import types

import pytest
from vllm_factory.core.config_format import Target
from vllm_factory.heads.colpali.config_format import merged, served_config

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


def test_a_package_config_update_is_merged_into_the_served_config(tmp_path, monkeypatch):
    package = types.ModuleType("nemotron_like")
    package.COLPALI_CONFIG_UPDATE = {
        "model_type": "qwen3_vl", "auto_map": None, "text_config": {"is_causal": False},
    }  # fmt: skip
    monkeypatch.setitem(sys.modules, "nemotron_like", package)
    nested = {**CONFIG, "model_type": "remote_vl", "auto_map": {"AutoModel": "m.M"}}
    (tmp_path / "config.json").write_text(json.dumps(nested))
    targets = {"remote_vl": Target("Ours", "ours_io", "nemotron_like")}
    config = served_config(str(tmp_path), targets=targets)
    assert config["model_type"] == "qwen3_vl" and "auto_map" not in config
    assert config["text_config"] == {"a": 1, "is_causal": False}
    assert config["architectures"] == ["Ours"] and config["io_processor_plugin"] == "ours_io"


def test_merged_nests_and_removes_but_never_changes_its_inputs():
    base = {"a": {"b": 1, "c": 2}, "d": 3}
    assert merged(base, {"a": {"c": None, "e": 4}, "d": {"x": 1}}) == {
        "a": {"b": 1, "e": 4}, "d": {"x": 1},
    }  # fmt: skip
    assert base == {"a": {"b": 1, "c": 2}, "d": 3}
