"""Packaging contract, checked without vLLM (entry points, vLLM only as an extra, no vLLM at
import, found by --config-format): :mod:`vllm_factory.core.testing.packaging`."""

from vllm_factory.core.testing.packaging import packaging_problems


def test_packaging_contract():
    assert packaging_problems("vllm_factory.models.lfm2_colbert") == []
