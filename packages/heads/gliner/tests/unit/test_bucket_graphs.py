"""BucketGraphs off CUDA: one bucket per key, the limit, and a failed capture said once."""

import logging

import torch
from vllm_factory.heads.gliner.bucket_graphs import BucketGraphs

CPU = torch.device("cpu")


def recipe(rows: int, made: list[int]):
    def make():
        made.append(rows)
        return [torch.zeros(rows)], lambda static: static[0] + 1, f"{rows} rows"

    return make


def test_one_bucket_per_key_its_buffers_and_the_limit() -> None:
    graphs, made = BucketGraphs("part", "runs eagerly", limit=2), []
    first = graphs.bucket(4, CPU, recipe(4, made))
    assert first is not None and first.graph is None  # off CUDA: the caller runs the body
    assert torch.equal(first.out, torch.ones(4))  # the body ran once on the zeroed buffers
    assert graphs.bucket(4, CPU, recipe(4, made)) is first
    assert graphs.bucket(8, CPU, recipe(8, made)) is not None
    assert graphs.bucket(16, CPU, recipe(16, made)) is None  # past the limit: eagerly
    assert made == [4, 8] and not graphs.failed


def test_a_failed_capture_is_said_once_and_nothing_is_captured_after(caplog) -> None:
    graphs, made = BucketGraphs("part", "runs eagerly"), []

    def broken():
        raise RuntimeError("no capture")

    with caplog.at_level(logging.WARNING):
        assert graphs.bucket(4, CPU, broken) is None
        assert graphs.bucket(8, CPU, recipe(8, made)) is None
    assert graphs.failed and made == []
    assert caplog.text.count("part: CUDA graph capture failed; runs eagerly") == 1
