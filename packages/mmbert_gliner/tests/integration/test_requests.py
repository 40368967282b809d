"""Batching, bad input and robustness against the real server (the shared suite:
:mod:`vllm_factory.heads.gliner.testing.requests`)."""

from vllm_factory.heads.gliner.testing.requests import (  # noqa: F401  (collected here)
    test_bad_input_is_4xx_naming_the_field,
    test_batched_equals_one_by_one,
    test_nan_threshold_is_rejected,
    test_server_keeps_serving_identical_entities_after_bad_input,
    test_string_and_list_text_and_duplicate_labels,
)
