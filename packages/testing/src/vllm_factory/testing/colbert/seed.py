"""vLLM Factory 0.2's README for the ColBERT models (:mod:`vllm_factory.testing.seed`): its
serve command refuses a PyLate checkpoint in one line naming ``--config-format colbert``, and
with that flag its request gets the token vectors its users read from ``data``.

A package's ``tests/integration/test_seed_readme.py`` star-imports this module; the fixtures
are the ColBERT family's (``checkpoint``, ``colbert_package``, ``corpus``).
"""

from __future__ import annotations

import pytest
from vllm_factory.testing import seed

FLAG = "--config-format colbert"
# The README's request text per model.
README_TEXT = {
    "moderncolbert_io": "European Central Bank monetary policy",
    "lfm2_colbert_io": "Mamba state-space model architecture",
}


@pytest.fixture(scope="module")
def readme_colbert(checkpoint, colbert_package):
    """The README's serve command with the flag its refusal names."""
    with seed.readme_server(checkpoint, colbert_package.io_processor, *FLAG.split()) as server:
        yield server


def test_readme_serve_command_refuses_in_one_line_naming_the_flag(checkpoint, colbert_package):
    """A PyLate checkpoint's config.json names the plain backbone: without the flag vLLM
    would serve its own ModernBERT / LFM2 class, answering every request with 400."""
    server = seed.readme_server(checkpoint, colbert_package.io_processor, eager=True)
    seed.assert_refused(server, FLAG)
    assert f"reads the outputs of {colbert_package.architecture}" in seed.refusal_line(server)


def test_readme_request_gets_the_text_token_vectors(readme_colbert, colbert_package):
    text = README_TEXT.get(colbert_package.io_processor, "European Central Bank monetary policy")
    seed.assert_normalised_token_vectors(seed.post(readme_colbert, {"text": text}))


def test_a_readme_style_client_ranks_documents_as_the_server_scores_them(readme_colbert, corpus):
    """A client of the README's kind: one request per text, MaxSim over ``data`` computed in
    plain Python; the server's own scoring request gives the same scores, to bf16 noise (the
    scoring request encodes the texts in another batch)."""
    query = corpus["queries"][0]
    documents = corpus["documents"][:4]
    query_vectors = seed.post(readme_colbert, {"text": query, "is_query": True})
    seed.assert_normalised_token_vectors(query_vectors)
    client = [seed.maxsim(query_vectors, seed.post(readme_colbert, {"text": d})) for d in documents]
    served = seed.post(readme_colbert, {"query": query, "documents": documents})["scores"]
    seed.assert_same_scores(client, served)


def test_several_texts_still_get_one_item_each(readme_colbert):
    """Our richer form stays: a list of texts answers one ``{"embeddings", "num_tokens"}``
    per text, base64 included."""
    items = seed.post(readme_colbert, {"text": ["first document", "second one"]})
    assert [sorted(item) for item in items] == [["embeddings", "num_tokens"]] * 2
    assert all(item["num_tokens"] == len(item["embeddings"]) for item in items)
    one = seed.post(readme_colbert, {"text": "first document", "encoding_format": "base64"})
    assert sorted(one) == ["dim", "embeddings", "num_tokens"]


__all__ = [name for name in dir() if name.startswith("test_") or name == "readme_colbert"]
