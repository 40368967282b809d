"""Packaging contract, checked without vLLM (entry points, vLLM only as an extra, no vLLM at
import, found by --config-format): :mod:`vllm_factory.testing.packaging`."""

import importlib.metadata as md

from packaging.requirements import Requirement
from vllm_factory.testing.packaging import packaging_problems


def test_packaging_contract():
    assert packaging_problems("vllm_factory.models.mt5_gliner") == []


def test_backbone_and_head_are_hard_dependencies():
    parsed = [Requirement(r) for r in md.requires("vllm-factory-mt5-gliner") or []]
    assert {"vllm-factory-mt5", "vllm-factory-gliner"} <= {r.name for r in parsed if not r.marker}
