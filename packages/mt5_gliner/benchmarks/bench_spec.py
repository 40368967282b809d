"""mt5_gliner's benchmark spec for ``nox -s bench -- --plugin mt5_gliner``
(``python -m vllm_factory.core.testing.bench --plugin mt5_gliner``).

mmbert_gliner's spec (``packages/mmbert_gliner/benchmarks``) with the mT5 backbone:

- Checkpoint: a random gliner model on mT5-base's encoder (``reference/build_checkpoint.py
  --size bench``: d_model 768, 12 layers, 12 heads x d_kv 64, gated-GELU d_ff 2048, 32
  buckets / max distance 128; gliner hidden 768, max_width 12, max_len 384 words, BiLSTM),
  built once with gliner in its venv, then run through ``vllm-factory-prep``; cached under
  ``.artifacts/mt5-gliner-bench/``.
- Requests, reference (mmbert_gliner's ``gliner_baseline.py``: ``GLiNER.inference`` at batch
  size 1 and the batch-size sweep) and token counts: as for mmbert_gliner (here the prompt is
  ``<<ENT>> person ... <<SEP>> words </s>``: no CLS, no BOS).
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


class MT5GLiNERSpec(_mmbert.MmBertGLiNERSpec):
    name = "mt5_gliner"

    def reference_script(self) -> Path:
        return SHARED / "benchmarks" / "gliner_baseline.py"

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
        root = repo_root() / ".artifacts" / "mt5-gliner-bench"
        return cached_artifact(f"checkpoint-bench-seed{SEED}", inputs, build, root=root) / "served"

    def servers(self, checkpoint: Path) -> list[ServerSpec]:
        return [
            ServerSpec(
                name="plugin",
                label="plugin mt5_gliner_io",
                io_processor_plugin=None,  # named in the prepared config.json
                hf_overrides=None,
                make_body=_mmbert.plugin_body,
                check=_mmbert.check_plugin,
            )
        ]

    def versions(self) -> list[str]:
        return [
            "vllm-factory-core", "vllm-factory-mt5", "vllm-factory-gliner",
            "vllm-factory-mt5-gliner", "vllm-factory-kernels",
        ]  # fmt: skip


SPEC = MT5GLiNERSpec()
