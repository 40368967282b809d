"""A GLiNER2 directory on a ModernBERT / mmBERT encoder is routed to this package: by
``--config-format gliner2`` (vllm-factory-gliner2's parser, which finds the installed package
declaring the encoder's ``model_type``) and by ``vllm-factory-prep``. No vLLM."""

import json

import pytest
from vllm_factory.models.gliner2.config_format import served_config
from vllm_factory.testing.gliner2.fixtures import library_fixture, prepared_config

LIBRARY_CONFIG = {"model_type": "extractor", "model_name": "jhu-clsp/mmBERT-base",
                  "architecture": "span", "span_head": {"max_width": 8, "span_mode": "markerV0"},
                  "counting_layer": "count_lstm", "token_pooling": "first"}  # fmt: skip
ENCODER_CONFIG = {"model_type": "modernbert", "hidden_size": 64, "vocab_size": 100,
                  "_name_or_path": "/somewhere", "architectures": ["ModernBertModel"]}  # fmt: skip
# A GLiNER2 directory as ``GLiNER2.save_pretrained`` lays it out, ModernBERT encoder.
library_dir = library_fixture(LIBRARY_CONFIG, ENCODER_CONFIG)


def test_config_format_serves_modernbert_encoders_with_this_package(library_dir):
    served = served_config(library_dir)
    assert served["architectures"] == ["MmBertGLiNER2ForExtraction"]
    assert served["io_processor_plugin"] == "mmbert_gliner2_io"
    assert served["model_type"] == "modernbert" and served["hidden_size"] == 64


def test_deberta_encoders_stay_with_vllm_factory_gliner2(library_dir):
    encoder = {**ENCODER_CONFIG, "model_type": "deberta-v2"}
    (library_dir / "encoder_config" / "config.json").write_text(json.dumps(encoder))
    assert served_config(library_dir)["architectures"] == ["DebertaGLiNER2ForExtraction"]


def test_prep_writes_a_directory_served_without_flags(library_dir, tmp_path):
    out = tmp_path / "served"
    served = prepared_config(library_dir, out)
    assert served["architectures"] == ["MmBertGLiNER2ForExtraction"]
    assert served["io_processor_plugin"] == "mmbert_gliner2_io"
    assert json.loads((out / "gliner2_config.json").read_text()) == LIBRARY_CONFIG


def test_unserved_heads_are_refused_naming_the_key(library_dir):
    config = {**LIBRARY_CONFIG, "counting_layer": "count_mlp"}
    (library_dir / "config.json").write_text(json.dumps(config))
    with pytest.raises(ValueError, match="counting_layer 'count_mlp' is not served"):
        served_config(library_dir)
