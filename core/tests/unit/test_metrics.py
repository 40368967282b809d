"""Refusal counters: field labels without indices, one increment per refusal."""

from __future__ import annotations

import pytest
from prometheus_client import REGISTRY
from vllm_factory.core import metrics


@pytest.mark.parametrize(
    ("field", "label"),
    [
        ("data.text[3]", "data.text"),
        ("data.images.2", "data.images"),
        ("data.entities[0].labels[12]", "data.entities.labels"),
        ("data.threshold", "data.threshold"),
        ("data", "data"),
        ("data.12.x", "data.x"),
    ],
)
def test_field_label_drops_list_indices(field, label):
    assert metrics.field_label(field) == label


def value(field: str, reason: str) -> float:
    found = REGISTRY.get_sample_value(
        f"{metrics.REFUSED_NAME}_total", {"field": field, "reason": reason}
    )
    return found or 0.0


def test_each_refusal_adds_one_under_its_field_and_reason():
    before = value("data.text", metrics.OVER_LIMIT), value("data.text", metrics.INVALID)
    metrics.count_refused("data.text[0]", metrics.OVER_LIMIT)
    metrics.count_refused("data.text[5]", metrics.OVER_LIMIT)
    metrics.count_refused("data.text")
    assert value("data.text", metrics.OVER_LIMIT) == before[0] + 2
    assert value("data.text", metrics.INVALID) == before[1] + 1
