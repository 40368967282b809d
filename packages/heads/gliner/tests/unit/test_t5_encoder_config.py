"""T5 / mT5 encoder configs: width saved as ``d_model``, encoder-decoder flag, spiece.model."""

import json

from gliner_dirs import write_gliner_dir
from vllm_factory.heads.gliner.prep import Target, prepare
from vllm_factory.heads.gliner.settings import parse_settings

T5_ENCODER = {
    "model_type": "mt5", "d_model": 16, "d_kv": 8, "num_heads": 2, "vocab_size": 100,
    "is_encoder_decoder": True, "architectures": ["MT5EncoderModel"],
}  # fmt: skip
GLINER_CONFIG = {
    "encoder_config": T5_ENCODER, "vocab_size": 103, "hidden_size": 8, "max_width": 4,
    "class_token_index": 101, "span_mode": "markerV0",
}  # fmt: skip


def test_t5_width_is_read_from_d_model():
    settings = parse_settings(GLINER_CONFIG)
    assert settings.encoder_hidden_size == 16 and settings.has_projection
    assert settings.encoder_model_type == "mt5"
    # hidden_size wins where both are present (configs that alias it)
    both = {**GLINER_CONFIG, "encoder_config": {**T5_ENCODER, "hidden_size": 8}}
    assert not parse_settings(both).has_projection


def test_prep_serves_only_the_encoder_and_copies_spiece(tmp_path):
    src = write_gliner_dir(tmp_path / "gliner", GLINER_CONFIG, '{"tokenizer_class": "T5Tokenizer"}')
    (src / "spiece.model").write_bytes(b"spm")
    targets = {"mt5": Target("MT5GLiNERForSpanNER", "mt5_gliner_io", "pkg")}
    out = prepare(src, tmp_path / "out", targets=targets)
    config = json.loads((out / "config.json").read_text())
    assert config["is_encoder_decoder"] is False
    assert config["architectures"] == ["MT5GLiNERForSpanNER"] and config["vocab_size"] == 103
    assert (out / "spiece.model").read_bytes() == b"spm"
