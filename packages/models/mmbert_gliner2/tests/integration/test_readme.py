"""The README's request, sent as written to the parity suite's server (the tiny ModernBERT
GLiNER2 served from gliner2's directory with ``--config-format gliner2``): answered in the
shape the README shows (the tiny model's entities are not the README's, its keys and kinds
are)."""

import json
import re
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"


def readme_request() -> dict:
    text = README.read_text(encoding="utf-8")
    body = re.search(r"curl localhost:8000/pooling .*? -d '(\{.*?\})'", text, re.DOTALL)
    assert body is not None, "no curl request in the README"
    return json.loads(body.group(1))


def test_readme_request_answers_as_shown(server, extract):
    request = readme_request()
    data = request["data"]
    result = extract(data)
    schema = data["schema"]
    assert set(result) == {"entities", "sentiment"}, result
    assert set(result["entities"]) == set(schema["entities"])
    assert all(data["text"].count(span) for spans in result["entities"].values() for span in spans)
    assert result["sentiment"] in schema["classifications"][0]["labels"]
