"""vLLM's own late-interaction scoring (/score, /rerank) on the same model.

vLLM tokenizes /score inputs itself (no PyLate prefixes or query expansion), so its scores
are MaxSim over plainly tokenized texts; the test checks exactly that against the
``token_embed`` vectors of the same texts.
"""

from __future__ import annotations

import numpy as np

QUERY = "how are late interaction scores computed"
DOCUMENTS = ["MaxSim sums the best match of every query token.", "Croissants every morning."]


def token_embed(server, text: str) -> np.ndarray:
    response = server.post(
        "/pooling", {"model": server.model, "input": text, "task": "token_embed"}
    )
    assert response.status_code == 200, response.text
    return np.asarray(response.json()["data"][0]["data"], dtype=np.float64)


def test_score_is_maxsim_of_token_embeddings(server):
    response = server.post("/score", {"model": server.model, "text_1": QUERY, "text_2": DOCUMENTS})
    assert response.status_code == 200, response.text
    scores = [item["score"] for item in sorted(response.json()["data"], key=lambda d: d["index"])]
    query = token_embed(server, QUERY)
    expected = [float((query @ token_embed(server, d).T).max(axis=1).sum()) for d in DOCUMENTS]
    np.testing.assert_allclose(scores, expected, rtol=1e-4)


def test_rerank_orders_documents_by_score(server):
    body = {"model": server.model, "query": QUERY, "documents": DOCUMENTS}
    response = server.post("/rerank", body)
    assert response.status_code == 200, response.text
    results = response.json()["results"]
    assert sorted(r["index"] for r in results) == [0, 1]
    scores = [r["relevance_score"] for r in results]
    assert scores == sorted(scores, reverse=True)
