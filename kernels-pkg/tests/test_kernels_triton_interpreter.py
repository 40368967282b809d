"""Run the Triton kernels through Triton's CPU interpreter (see interp_kernels_triton.py).

The interpreter suite runs once, in a subprocess started with ``TRITON_INTERPRET=1`` already
in its environment, so the variable is seen before triton is imported (what triton 3.9 needs:
it chooses interpreter vs compiler when a kernel is decorated). One subprocess, not one per
kernel, because its start-up (torch + triton imports) costs several seconds on 2 cores; the
tests below then check each kernel family's results from that run.
"""

from __future__ import annotations

import importlib.util
import os
import pathlib
import re
import subprocess
import sys

import pytest

HERE = pathlib.Path(__file__).resolve().parent
SUITE = "interp_kernels_triton.py"

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("triton") is None, reason="triton is not installed"
)


@pytest.fixture(scope="module")
def interpreter_run() -> tuple[int, str]:
    env = dict(os.environ, TRITON_INTERPRET="1")
    env.pop("VLLM_FACTORY_DISABLE_TRITON", None)
    cmd = [
        sys.executable, "-m", "pytest", "-q", "-rA", "-p", "no:cacheprovider", "-o", "addopts=",
        # Overflow/invalid-value warnings inside a kernel would mean inf/nan on a GPU too.
        "-W", "error::RuntimeWarning", SUITE,
    ]  # fmt: skip
    proc = subprocess.run(
        cmd, cwd=HERE, env=env, capture_output=True, text=True, timeout=600, check=False
    )
    return proc.returncode, proc.stdout + proc.stderr


def test_interpreter_suite_passed(interpreter_run: tuple[int, str]) -> None:
    returncode, out = interpreter_run
    assert returncode == 0, out
    assert not re.search(r"\d+ (skipped|failed|errors?|deselected)\b", out), out


@pytest.mark.parametrize(
    ("test_name", "minimum"),
    [
        ("test_kernels_are_interpreted", 1),
        ("test_auto_still_uses_torch_on_cpu", 1),
        ("test_rope", 5),
        ("test_rope_strided_qkv_views", 1),
        ("test_rope_half_precision", 2),
        ("test_geglu", 10),
        ("test_geglu_half_precision_and_leading_dims", 2),
        ("test_layernorm", 4),
        ("test_add_layernorm", 4),
        ("test_add_layernorm_half_precision", 2),
        ("test_deberta_attention", 5),
        ("test_deberta_attention_variants", 3),
        ("test_deberta_attention_half_precision", 1),
        ("test_attention_by_rows", 6),
        ("test_attention_by_rows_with_bias", 2),
        ("test_rows_benchmark_measures", 3),
        ("test_span_logits", 5),
        ("test_span_logits_half_precision", 2),
        ("test_span_logits_without_spans", 1),
    ],
)
def test_interpreted_kernel_family(
    interpreter_run: tuple[int, str], test_name: str, minimum: int
) -> None:
    _, out = interpreter_run
    passed = re.findall(rf"^PASSED {re.escape(SUITE)}::{test_name}(?:\[|$)", out, re.MULTILINE)
    failed = re.findall(
        rf"^(?:FAILED|ERROR) {re.escape(SUITE)}::{test_name}(?:\[|$| )", out, re.MULTILINE
    )
    assert not failed, out
    assert len(passed) >= minimum, out
