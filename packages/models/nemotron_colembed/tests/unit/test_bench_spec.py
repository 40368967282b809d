"""The benchmark spec without vLLM: prompts read from the checkpoint as the plugin builds them,
native's request bodies and server settings (no projection, other vectors expected)."""

from __future__ import annotations

import json
import struct
import sys
from pathlib import Path

import numpy as np
import pytest
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast
from vllm_factory.heads.colpali.image_processing import use_pil_image_processors

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import bench_spec
from vllm_factory.testing.colpali import bench as colpali_bench

SPEC = bench_spec.SPEC
TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n"
    "{% for p in m['content'] %}{% if p['type'] == 'image' %}<|vision_start|><|image_pad|>"
    "<|vision_end|>{% else %}{{ p['text'] }}{% endif %}{% endfor %}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
IMAGE_PROMPT = (
    "<|im_start|>user\n<|vision_start|><|image_pad|><|vision_end|>passage: <|im_end|>\n"
    "<|im_start|>assistant\n"
)


@pytest.fixture
def checkpoint(tmp_path: Path) -> Path:
    """A tokenizer with the chat template, NVIDIA's processor settings, a config and a
    safetensors header without projection."""
    folder = tmp_path / "ckpt"
    folder.mkdir()
    words = ["[UNK]", "<|im_start|>", "<|im_end|>", "<|vision_start|>", "<|image_pad|>",
             "<|vision_end|>", "user", "assistant", "Query:", "query:", "passage:"]  # fmt: skip
    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]")
    fast.chat_template = TEMPLATE
    fast.save_pretrained(folder)
    use_pil_image_processors()
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import (
        Qwen2VLImageProcessorPil,
    )

    budget = {"shortest_edge": 4 * 1024, "longest_edge": 256 * 1024}
    Qwen2VLImageProcessorPil(patch_size=16, merge_size=2, temporal_patch_size=2,
                             size=budget).save_pretrained(folder)  # fmt: skip
    (folder / "processor_config.json").write_text(json.dumps({"query_prefix": "query:"}))
    config = {"text_config": {"hidden_size": 48}, "vision_config": {}}
    (folder / "config.json").write_text(json.dumps(config))
    header = json.dumps({"model.language_model.norm.weight": {
        "dtype": "F32", "shape": [48], "data_offsets": [0, 0]}}).encode()  # fmt: skip
    (folder / "model.safetensors").write_bytes(struct.pack("<Q", len(header)) + header)
    return folder


@pytest.fixture
def spec(checkpoint: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(SPEC, "bench_root", lambda: tmp_path / "bench")
    SPEC.use_prompts_of(checkpoint)
    return SPEC


def test_prompts_are_the_plugins(spec, checkpoint: Path) -> None:
    assert spec.image_prompt == IMAGE_PROMPT
    assert spec.query_prefix == "<|im_start|>user\nQuery: query: "
    assert spec.query_suffix == "<|im_end|>\n<|im_start|>assistant\n"
    # The plugin's own prompt for a query (its IOProcessor's text_ids build the same string).
    from vllm_factory.models.nemotron_colembed.prompts import ChatFrame, ProcessorSettings

    tok = spec._tokenizer(checkpoint)
    plugin = ChatFrame(tok, [])(ProcessorSettings(query_prefix="query:").query("revenue"))
    assert spec.query_prefix + "revenue" + spec.query_suffix == plugin
    count = spec.token_counter(checkpoint)
    assert count("revenue") == len(tok(plugin)["input_ids"])


def test_no_projection_and_native_needs_no_dim(spec, checkpoint: Path) -> None:
    pytest.importorskip("vllm")  # the plugin's video processor stand-in
    assert colpali_bench.projection_dim(checkpoint) is None
    assert spec.vector_dim(checkpoint) == 48
    spec.workload = "queries"
    plugin, native = spec.servers(checkpoint)
    assert native.hf_overrides is None and "other vectors" in native.label
    body = native.make_body("m", "revenue", "base64")
    assert body["input"] == spec.query_prefix + "revenue" + spec.query_suffix
    assert plugin.make_body("m", "revenue", "float")["data"] == {"text": "revenue",
                                                                 "is_query": True}  # fmt: skip
    spec.workload = "pages"
    plugin, native = spec.servers(checkpoint)
    # Native serves the same files plus the video processor vLLM's processor loads.
    assert plugin.checkpoint is None and native.checkpoint != checkpoint
    video = json.loads((native.checkpoint / "video_preprocessor_config.json").read_text())
    assert video["patch_size"] == 16 and video["merge_size"] == 2
    assert video["size"] == {"shortest_edge": 8 * 1024, "longest_edge": 512 * 1024}  # 2 frames
    for path in checkpoint.iterdir():
        assert (native.checkpoint / path.name).resolve() == path.resolve()
    args = list(native.extra_args)
    template = Path(args[args.index("--chat-template") + 1]).read_text()
    jinja2 = pytest.importorskip("jinja2")
    message = {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}
    assert jinja2.Template(template).render(messages=[message]) == IMAGE_PROMPT
    # As transformers renders it for vLLM (trim_blocks, lstrip_blocks, final newline dropped).
    tok = spec._tokenizer(checkpoint)
    assert tok.apply_chat_template([message], chat_template=template, tokenize=False) == (
        IMAGE_PROMPT
    )


def test_native_with_other_vectors_is_recorded_not_flagged(spec, caplog) -> None:
    rng = np.random.default_rng(0)
    ours = rng.standard_normal((3, 4)).astype(np.float32)
    spec.plugin_seen, spec.corpus_tokens, spec._prompt = [ours], [3], None
    spec.workload = "queries"
    answer = {"data": [{"data": (-ours).tolist()}]}
    figures = spec.describe_native([{}], [answer], dim=4)
    assert figures["matches_plugin"] is False and figures["expected_to_match"] is False
    assert figures["tokens_equal_corpus"] is True
    assert "differ" not in caplog.text
