"""Every client error built by the compat layer is counted once; a server budget as over_limit."""

from __future__ import annotations

import pytest
from prometheus_client import REGISTRY
from vllm_factory.core import compat, metrics
from vllm_factory.core.io_processor import budget_check


def value(field: str, reason: str) -> float:
    found = REGISTRY.get_sample_value(
        f"{metrics.REFUSED_NAME}_total", {"field": field, "reason": reason}
    )
    return found or 0.0


def test_validation_error_is_counted_as_invalid():
    before = value("data.labels", metrics.INVALID)
    error = compat.validation_error("data.labels[2]: empty", "data.labels[2]")
    assert "data.labels[2]" in str(error)
    assert value("data.labels", metrics.INVALID) == before + 1


def test_budget_check_counts_only_what_it_refuses():
    before = value("data.text", metrics.OVER_LIMIT)
    budget_check("data.text", 10, 10, "characters", "VLLM_FACTORY_MAX_REQUEST_CHARS", "split it")
    assert value("data.text", metrics.OVER_LIMIT) == before
    with pytest.raises(Exception, match="more than this server takes"):
        budget_check("data.text", 11, 10, "characters", "VLLM_FACTORY_MAX_REQUEST_CHARS", "split")
    assert value("data.text", metrics.OVER_LIMIT) == before + 1
