"""mmbert_gliner's benchmark spec for ``nox -s bench -- --plugin mmbert_gliner``
(``python -m vllm_factory.core.testing.bench --plugin mmbert_gliner``).

- Checkpoint: a random gliner model of real width (``reference/build_checkpoint.py --size
  bench``: ModernBERT hidden 768, 22 layers, 12 heads, alternating global / 128-token
  sliding-window attention; gliner hidden 768, max_width 12, max_len 384 words, BiLSTM),
  built once with gliner in its venv, then run through ``vllm-factory-prep``; cached under
  ``.artifacts/mmbert-gliner-bench/``. Both the plugin and gliner load the prepared directory
  (it keeps gliner_config.json, weights and tokenizer as gliner saved them).
- Requests: one text per ``POST /pooling``, ``{"text": T, "labels": LABELS, "threshold":
  0.5}`` with the 5 labels of ``gliner_baseline.LABELS``. No native vLLM model exists.
- Reference: ``gliner_baseline.py`` (``GLiNER.inference`` on the same texts and labels) at
  batch size 1 and the batch-size sweep; the report gives batch size 1 and the best one.
- Token counts (corpus lengths, tokens/s): the text's own tokens, i.e. the full gliner prompt
  (``[CLS] <<ENT>> person ... <<SEP>> words [SEP]``) minus its fixed part (special tokens and
  the 5-label prompt, the same for every request).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from functools import cache
from pathlib import Path

from vllm_factory.core.testing.bench import BenchConfig, PluginSpec, ServerSpec, repo_root
from vllm_factory.core.testing.refenv import cached_artifact

HERE = Path(__file__).resolve().parent
REFERENCE = HERE.parent / "reference"
SEED = 0

sys.path.insert(0, str(HERE))
from gliner_baseline import LABELS, THRESHOLD

sys.path.remove(str(HERE))


def _reference_module():
    sys.path.insert(0, str(REFERENCE))
    try:
        import mmbert_gliner_reference
    finally:
        sys.path.remove(str(REFERENCE))
    return mmbert_gliner_reference


def plugin_body(model: str, text: str, encoding: str) -> dict:
    return {"model": model, "data": {"text": text, "labels": LABELS, "threshold": THRESHOLD}}


def check_plugin(answer: dict) -> None:
    items = answer.get("data")
    if not (isinstance(items, list) and len(items) == 1 and isinstance(items[0], list)):
        raise ValueError(f"plugin: expected one entity list, got {str(answer)[:300]}")


class MmBertGLiNERSpec(PluginSpec):
    name = "mmbert_gliner"
    reference_library = "gliner"

    def word_texts(self) -> list[str]:
        return json.loads((REFERENCE / "corpus.json").read_text(encoding="utf-8"))["texts"]

    def reference_python(self, config: BenchConfig) -> Path:
        if config.ref_python:
            return Path(config.ref_python)
        return _reference_module().gliner_env().ensure().python

    def reference_script(self) -> Path:
        return HERE / "gliner_baseline.py"

    def checkpoint(self, config: BenchConfig, max_tokens: int) -> Path:
        if config.checkpoint:
            return Path(config.checkpoint)
        python = self.reference_python(config)

        def build(target: Path) -> None:
            raw = target / "gliner"
            subprocess.run(
                [str(python), str(REFERENCE / "build_checkpoint.py"), "--out", str(raw),
                 "--size", "bench", "--seed", str(SEED)],
                check=True, env={**os.environ, "HF_HUB_OFFLINE": "1"},
            )  # fmt: skip
            from vllm_factory.heads.gliner.prep import prepare

            prepare(raw, target / "served")

        inputs = [REFERENCE / "build_checkpoint.py", REFERENCE / "corpus.json"]
        root = repo_root() / ".artifacts" / "mmbert-gliner-bench"
        return cached_artifact(f"checkpoint-bench-seed{SEED}", inputs, build, root=root) / "served"

    def max_model_len(self, checkpoint: Path, max_tokens: int) -> int:
        return max(max_tokens, 512)

    def token_counter(self, checkpoint: Path) -> Callable[[str], int]:
        from transformers import AutoTokenizer
        from vllm_factory.heads.gliner.prompts import prompt_words, split_words
        from vllm_factory.heads.gliner.settings import parse_settings

        settings = parse_settings(json.loads((checkpoint / "gliner_config.json").read_text()))
        tokenizer = AutoTokenizer.from_pretrained(str(checkpoint))
        prompt = prompt_words(LABELS, settings.ent_token, settings.sep_token)

        def full(words: list[str]) -> int:
            return len(tokenizer(prompt + words, is_split_into_words=True)["input_ids"])

        overhead = full([])  # special tokens + the label prompt, the same for every text

        @cache
        def count(text: str) -> int:  # the text's own tokens, so that "short" (8-32) fits
            return full([w.text for w in split_words(text, settings.max_len)]) - overhead

        return count

    def servers(self, checkpoint: Path) -> list[ServerSpec]:
        return [
            ServerSpec(
                name="plugin",
                label="plugin mmbert_gliner_io",
                io_processor_plugin=None,  # named in the prepared config.json
                hf_overrides=None,
                make_body=plugin_body,
                check=check_plugin,
            )
        ]

    def versions(self) -> list[str]:
        return [
            "vllm-factory-core", "vllm-factory-modernbert", "vllm-factory-gliner",
            "vllm-factory-mmbert-gliner", "vllm-factory-kernels",
        ]  # fmt: skip


SPEC = MmBertGLiNERSpec()
