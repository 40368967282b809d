"""``embed_dtype`` (int8, uint8, binary, ubinary) against sentence-transformers'
``quantize_embeddings`` of the served float vectors, texts and images (the ColPali family's
test: one package)."""

from vllm_factory.testing.colbert.references import st_env
from vllm_factory.testing.colpali.fixtures import image_b64
from vllm_factory.testing.quantize import check_multivector_compact


def test_compact_vectors_equal_the_library(server, corpus):
    images = [image_b64(path) for path in corpus.images[:2]]
    documents = corpus.documents[:4]
    check_multivector_compact(server, st_env(), documents, corpus.queries[0], images)
