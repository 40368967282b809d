"""deberta_gliner's benchmark spec for ``nox -s bench -- --plugin deberta_gliner``
(``python -m vllm_factory.core.testing.bench --plugin deberta_gliner``).

mmbert_gliner's spec (same requests, same ``gliner_baseline.py``, same reports) with this
package's checkpoint:

- Checkpoint: a random gliner model of real width on a DeBERTa-v3-base-shaped encoder
  (``reference/build_checkpoint.py --size bench``: hidden 768, 12 layers, 12 heads, 256
  position buckets, c2p|p2c, shared keys; gliner hidden 512, max_width 12, max_len 384, BiLSTM,
  as gliner_multi-v2.1 / gliner_medium-v2.1), built once with gliner in its venv, then run
  through ``vllm-factory-prep``; cached under ``.artifacts/deberta-gliner-bench/``.
- Requests: one text per ``POST /pooling`` with the 5 labels of ``gliner_baseline.LABELS``,
  threshold 0.5. No native vLLM model exists (vLLM has no DeBERTa).
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
from pathlib import Path

from vllm_factory.core.testing.bench import BenchConfig, ServerSpec, repo_root
from vllm_factory.core.testing.refenv import cached_artifact

HERE = Path(__file__).resolve().parent
REFERENCE = HERE.parent / "reference"
SHARED = HERE.parents[1] / "mmbert_gliner"
SEED = 0


def _load(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_mmbert = _load("bench_spec_mmbert_gliner_base", SHARED / "benchmarks" / "bench_spec.py")


class DebertaGLiNERSpec(_mmbert.MmBertGLiNERSpec):
    name = "deberta_gliner"

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

        inputs = [
            REFERENCE / "build_checkpoint.py",
            SHARED / "reference" / "build_checkpoint.py",
            SHARED / "reference" / "corpus.json",
        ]
        root = repo_root() / ".artifacts" / "deberta-gliner-bench"
        return cached_artifact(f"checkpoint-bench-seed{SEED}", inputs, build, root=root) / "served"

    def servers(self, checkpoint: Path) -> list[ServerSpec]:
        return [
            ServerSpec(
                name="plugin",
                label="plugin deberta_gliner_io",
                io_processor_plugin=None,  # named in the prepared config.json
                hf_overrides=None,
                make_body=_mmbert.plugin_body,
                check=_mmbert.check_plugin,
            )
        ]

    def versions(self) -> list[str]:
        return [
            "vllm-factory-core", "vllm-factory-deberta", "vllm-factory-gliner",
            "vllm-factory-deberta-gliner", "vllm-factory-kernels",
        ]  # fmt: skip


SPEC = DebertaGLiNERSpec()
