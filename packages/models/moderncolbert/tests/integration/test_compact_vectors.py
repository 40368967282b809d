"""``embed_dtype`` (int8, uint8, binary, ubinary) against sentence-transformers'
``quantize_embeddings`` of the served float vectors (the ColBERT family's test: one package)."""

from vllm_factory.testing.colbert.references import st_env
from vllm_factory.testing.quantize import check_multivector_compact


def test_compact_vectors_equal_the_library(server, corpus):
    documents = corpus["documents"][:5]
    check_multivector_compact(server, st_env(), documents, corpus["queries"][0])
