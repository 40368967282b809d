"""vLLM Factory 0.2's README for GLiNER2 (:mod:`vllm_factory.testing.seed`): its prep command
(``vllm-factory-prep --model SRC --output DIR``), its serve command on the prepared directory,
and the request its GLiNER2 clients send (a schema of every kind, ``"runtime": "classic"``),
answered with the dictionary ``GLiNER2.extract`` returns.

A package's ``tests/integration/test_seed_readme.py`` star-imports this module; the fixtures
are the GLiNER2 family's (``reference_dir``, ``extract``: the same checkpoint served with
``--config-format gliner2``).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from vllm_factory.testing.gliner.seed import prep_command
from vllm_factory.testing.seed import dumps, post, readme_server

PLUGIN = "deberta_gliner2_io"
# The request of vLLM Factory 0.2's GLiNER2 clients: every schema kind in the dictionary forms
# they send, options, and the runtime they name.
CLIENT_REQUEST = {
    "text": "Tim Cook announced the iPhone 15 at Apple Park.",
    "schema": {
        "entities": {"person": "Person names", "company": "Company names",
                     "product": "Product names", "location": "Places and locations"},
        "classifications": [{"task": "sentiment", "labels": ["positive", "negative", "neutral"]}],
        "relations": ["works_for", "located_in"],
        "structures": {"product_summary": {"fields": [
            {"name": "name", "dtype": "str"}, {"name": "launch_site", "dtype": "str"},
            {"name": "highlights", "dtype": "list"},
        ]}},
    },
    "threshold": 0.5,
    "include_confidence": True,
    "include_spans": True,
    "runtime": "classic",
}  # fmt: skip


@pytest.fixture(scope="module")
def readme_gliner2(reference_dir: Path, tmp_path_factory: pytest.TempPathFactory):
    out = tmp_path_factory.mktemp("readme") / "gliner2-vllm"
    prep_command(reference_dir / "checkpoint", out)
    with readme_server(out, PLUGIN) as server:
        yield server


def test_a_client_request_gets_what_extract_returns(readme_gliner2, extract):
    """The prepared directory under the README's flags answers as the library's own directory
    does under ``--config-format gliner2`` (fp32 there, bf16 here: the same keys, tasks and
    label choices)."""
    data = post(readme_gliner2, CLIENT_REQUEST)
    assert isinstance(data, dict), dumps(data)
    assert set(data) == {"entities", "sentiment", "relation_extraction", "product_summary"}
    assert set(data["entities"]) == set(CLIENT_REQUEST["schema"]["entities"])
    assert data["sentiment"]["label"] in ("positive", "negative", "neutral")
    reference = extract({k: v for k, v in CLIENT_REQUEST.items() if k != "runtime"})
    assert set(reference) == set(data)


def test_another_runtime_is_refused_naming_the_field(readme_gliner2):
    response = readme_gliner2.pooling({**CLIENT_REQUEST, "runtime": "onnx"})
    assert response.status_code == 400
    assert "data.runtime" in response.text


__all__ = [name for name in dir() if name.startswith("test_") or name == "readme_gliner2"]
