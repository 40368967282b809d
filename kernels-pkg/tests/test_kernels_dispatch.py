"""Backend selection rules (CPU side; the CUDA side is in test_kernels_cuda.py)."""

from __future__ import annotations

import importlib.util

import pytest
import torch
from vllm_factory import kernels
from vllm_factory.kernels import _dispatch


def test_public_api_and_version() -> None:
    for name in kernels.__all__:
        assert hasattr(kernels, name), name
    assert kernels.__version__ == "0.1.2"  # 0.1.2: length-grouped DeBERTa fallback


def test_namespace_package_has_no_init() -> None:
    import vllm_factory

    # PEP 420: the shared namespace must not be claimed by this wheel.
    assert getattr(vllm_factory, "__file__", None) is None


def test_auto_picks_torch_on_cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    x = torch.zeros(2, 4)
    assert _dispatch.select_backend("auto", x) == "torch"
    assert _dispatch.select_backend("torch", x) == "torch"


def test_explicit_triton_on_cpu_without_interpreter_raises(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    with pytest.raises(RuntimeError):
        _dispatch.select_backend("triton", torch.zeros(2, 4))
    with pytest.raises(RuntimeError):
        kernels.fused_geglu(torch.zeros(2, 4), backend="triton")


def test_unknown_backend_rejected() -> None:
    with pytest.raises(ValueError):
        _dispatch.select_backend("cuda", torch.zeros(1))


@pytest.mark.parametrize(
    ("value", "expected"), [("1", True), ("true", True), ("0", False), ("", False)]
)
def test_disable_env(monkeypatch: pytest.MonkeyPatch, value: str, expected: bool) -> None:
    monkeypatch.setenv(_dispatch.DISABLE_ENV, value)
    assert _dispatch.triton_disabled() is expected


def test_triton_available_matches_find_spec() -> None:
    if importlib.util.find_spec("triton") is None:
        assert not _dispatch.triton_available()
    else:
        assert _dispatch.triton_available()


@pytest.mark.parametrize(("n", "p"), [(1, 1), (2, 2), (3, 4), (32, 32), (96, 128), (1152, 2048)])
def test_next_power_of_2(n: int, p: int) -> None:
    assert _dispatch.next_power_of_2(n) == p


def test_no_vllm_import() -> None:
    import pathlib

    src = pathlib.Path(kernels.__file__).parent
    for path in src.glob("*.py"):
        text = path.read_text()
        assert "import vllm\n" not in text and "from vllm." not in text, path


def test_fallbacks_trace_whole_under_torch_compile(monkeypatch: pytest.MonkeyPatch) -> None:
    """vLLM compiles encoders with ``fullgraph=True``: every kernel on a model path must trace
    into one graph through its fallback (no Triton launch, no logging) and give eager's result.
    Traced first, before any eager call has announced the kernels (as in a server)."""
    monkeypatch.setattr(_dispatch, "_ANNOUNCED", set())
    torch.manual_seed(0)
    tokens, heads, dim = 7, 2, 16
    x = torch.randn(tokens, heads * dim)
    weight, bias = torch.randn(heads * dim), torch.randn(heads * dim)
    cos, sin = kernels.build_rope_cache(32, dim, 10000.0)
    positions = torch.arange(tokens)

    def block(x: torch.Tensor) -> torch.Tensor:
        q, k = kernels.fused_rope(x.view(tokens, heads, dim), x.view(tokens, heads, dim),
                                  positions, cos, sin)  # fmt: skip
        h = kernels.fused_layernorm(q.reshape(tokens, -1), weight, bias)
        h, residual = kernels.fused_add_layernorm(h, k.reshape(tokens, -1), weight, bias)
        h = kernels.fused_geglu(torch.cat((h, residual), dim=-1))
        return kernels.fused_rmsnorm(h, weight)

    compiled = torch.compile(block, fullgraph=True, backend="eager")
    got = compiled(x)
    assert _dispatch._ANNOUNCED == set()  # nothing logged from inside the traced graph
    torch.testing.assert_close(got, block(x))
    assert _dispatch._ANNOUNCED  # eager calls still announce
