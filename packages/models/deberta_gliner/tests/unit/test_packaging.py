"""Packaging contract, checked without vLLM (entry points, vLLM only as an extra, no vLLM at
import, found by --config-format): :mod:`vllm_factory.testing.packaging`."""

import importlib.metadata as md

from packaging.requirements import Requirement
from vllm_factory.testing.packaging import packaging_problems


def test_packaging_contract():
    assert packaging_problems("vllm_factory.models.deberta_gliner") == []


def test_kernels_pin_has_the_deberta_attention_kernel():
    # flash_deberta_attention first shipped in vllm-factory-kernels 0.1.1.
    reqs = {r.name: r for r in map(Requirement, md.requires("vllm-factory-deberta-gliner") or [])}
    assert "0.1.0" not in reqs["vllm-factory-kernels"].specifier
    assert "0.1.1" in reqs["vllm-factory-kernels"].specifier
    assert "vllm-factory-deberta" in reqs
