"""Reference-building steps the ColBERT packages share (run from their ``reference`` modules in
the serving venv; the work happens in the reference library's own venv)."""

from __future__ import annotations

from pathlib import Path

from vllm_factory.core.testing.refenv import ReferenceEnv


def build_st_layout(
    st: ReferenceEnv, scripts: Path, checkpoint: Path, target: Path, corpus: Path, variant: str
) -> None:
    """The weights of ``checkpoint`` saved by sentence-transformers in its own multi-vector
    layout (``target/checkpoint-st``, ``variant`` as ``build_st_checkpoint.py`` takes it), and
    its fp32 and bf16 outputs on ``corpus`` (``ref-st-layout.npz``, ``ref-st-layout-bf16.npz``).
    ``scripts``: the folder holding ``build_st_checkpoint.py`` and ``encode_reference.py``."""
    st.run(
        scripts / "build_st_checkpoint.py", "--from", checkpoint,
        "--out", target / "checkpoint-st", "--variant", variant,
    )  # fmt: skip
    for dtype, out in (("float32", "ref-st-layout.npz"), ("bfloat16", "ref-st-layout-bf16.npz")):
        st.run(
            scripts / "encode_reference.py", "--library", "st", "--checkpoint",
            target / "checkpoint-st", "--corpus", corpus, "--out", target / out, "--dtype", dtype,
        )  # fmt: skip
