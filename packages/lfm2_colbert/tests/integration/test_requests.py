"""Batching, truncation, bad input against the real server (the shared suite:
:mod:`vllm_factory.heads.colbert.testing.requests`)."""

from vllm_factory.heads.colbert.testing.requests import (  # noqa: F401  (collected here)
    test_bad_input_gets_4xx_naming_the_field_and_server_keeps_serving,
    test_base64_encoding_decodes_to_the_float_vectors,
    test_batch_equals_one_request_per_text,
    test_huge_text_is_truncated_to_document_length,
    test_missing_data_is_a_4xx,
    test_scoring_ranks_like_its_scores_and_batches_like_one_by_one,
    test_single_text_gives_one_result,
    test_vectors_are_normalised,
)
