"""Packaging contract, checked without vLLM (entry points, vLLM only as an extra, no vLLM at
import, found by --config-format): :mod:`vllm_factory.testing.packaging`."""

from vllm_factory.testing.packaging import packaging_problems


def test_packaging_contract():
    assert packaging_problems("vllm_factory.models.mmbert_gliner2") == []
