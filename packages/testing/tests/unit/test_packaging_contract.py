"""The shared packaging check finds what breaks the contract (on an installed model package)."""

import pytest
from vllm_factory.testing.packaging import packaging_problems


def test_a_wrong_declaration_is_named(monkeypatch):
    module = pytest.importorskip("vllm_factory.models.embeddinggemma")
    assert packaging_problems(module.__name__) == []
    monkeypatch.setattr(module, "IO_PROCESSOR", "not_the_entry_point")
    (problem,) = packaging_problems(module.__name__)
    assert "not_the_entry_point" in problem and "vllm-factory-embeddinggemma" in problem
