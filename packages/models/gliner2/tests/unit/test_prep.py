"""``vllm-factory-prep`` on a GLiNER2 directory (this package's preparer, found through the
``vllm_factory.prep`` entry points): the library's files kept, ``config.json`` the served one,
the library's own read back from ``gliner2_config.json``. No vLLM."""

import json

import pytest
from vllm_factory.core.checkpoint import CheckpointFiles
from vllm_factory.heads.gliner.prep import PrepError, main, preparers
from vllm_factory.models.gliner2.prep import GLINER2
from vllm_factory.models.gliner2.settings import read_settings
from vllm_factory.testing.gliner2.fixtures import library_fixture, prepared_config

LIBRARY_CONFIG = {"model_type": "extractor", "model_name": "x", "max_width": 6,
                  "counting_layer": "count_lstm", "token_pooling": "first"}  # fmt: skip
ENCODER_CONFIG = {"model_type": "deberta-v2", "hidden_size": 32, "vocab_size": 100,
                  "_name_or_path": "/somewhere", "architectures": ["DebertaV2Model"]}  # fmt: skip
# A GLiNER2 directory as ``GLiNER2.save_pretrained`` lays it out.
library_dir = library_fixture(LIBRARY_CONFIG, ENCODER_CONFIG)


def test_the_preparer_is_installed_and_recognizes_gliner2_directories(library_dir, tmp_path):
    assert ("gliner2", GLINER2) in preparers()
    assert GLINER2.recognizes(library_dir)
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "config.json").write_text("{}")
    assert not GLINER2.recognizes(tmp_path / "other")


def test_prep_writes_a_directory_served_without_flags(library_dir, tmp_path):
    out = tmp_path / "served"
    served = prepared_config(library_dir, out)
    assert served["architectures"] == ["DebertaGLiNER2ForExtraction"]
    assert served["io_processor_plugin"] == "deberta_gliner2_io"
    assert served["model_type"] == "deberta-v2" and "_name_or_path" not in served
    assert json.loads((out / "gliner2_config.json").read_text()) == LIBRARY_CONFIG
    for name in ("model.safetensors", "tokenizer.json", "encoder_config/config.json"):
        assert (out / name).read_bytes() == (library_dir / name).read_bytes()
    # the server reads the head settings from the prepared directory as from the library's
    settings = read_settings(CheckpointFiles(str(out)))
    assert settings == read_settings(CheckpointFiles(str(library_dir)))
    assert settings.max_width == 6


def test_refusals_name_the_reason(library_dir, tmp_path):
    out = tmp_path / "served"
    out.mkdir()
    (out / "x").write_text("")
    with pytest.raises(PrepError, match="not empty"):
        GLINER2.prepare(library_dir, out)
    GLINER2.prepare(library_dir, out, force=True)
    with pytest.raises(PrepError, match="must differ"):
        GLINER2.prepare(library_dir, library_dir, force=True)
    (library_dir / "config.json").write_text(json.dumps({**LIBRARY_CONFIG, "architecture": "x"}))
    with pytest.raises(PrepError, match="architecture 'x' is not served"):
        GLINER2.prepare(library_dir, tmp_path / "o2")
    assert main(["--model", str(library_dir), "--output", str(tmp_path / "o3"),
                 "--architecture", "A"]) == 2  # fmt: skip
