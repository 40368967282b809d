"""Long GLiNER2 texts served in windows vs gliner2's own ``extract_long`` (the family suite; a
package's ``tests/integration/test_long.py`` star-imports this module).

The texts are made here (deterministic): about 1, 2.5 and 10 windows of :data:`CHUNK` words
(the server's 512 tokens hold about 190 of the tiny checkpoint's words, so the longer texts do
not fit whole and are read in windows), with accented, combining, CJK, emoji and odd
whitespace words throughout, so that window borders fall on them. Every schema kind (entities,
classifications single and multi-label, a structure with a choice field, relations) is run
with confidences and offsets, and some without. The library's results come from
``scripts/gliner2_long.py`` (``extract_long`` for the long texts, ``extract`` for the one that
fits); the served results must equal them, confidences within the fp32 tolerance. Below fp32,
a case's result may differ only as often as the library's own bf16 run differs from its fp32
results (x ``library_factor()``, + 1), as in the parity suite, confidences within the dtype's
tolerance.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from vllm_factory.testing.gliner2.parity import allowed_differences, same_result
from vllm_factory.testing.gliner2.references import KIT_INPUTS, gliner2_env
from vllm_factory.testing.parity import tolerance
from vllm_factory.testing.refenv import SCRIPTS, cached_artifact

__all__ = [
    "long_reference",
    "long_served",
    "test_long_text_settings_are_bounded",
    "test_long_texts_equal_extract_long",
    "test_truncate_reads_the_start_and_error_refuses",
    "test_windows_of_several_texts_share_one_request",
]

SCRIPT = SCRIPTS / "gliner2_long.py"
CHUNK, OVERLAP = 120, 24  # words per window, words shared (both fit the server's 512 tokens)
SIZES = {"w1": 100, "w2_5": 264, "w10": 950}  # words: one prompt, ~2.5 and 10 windows
SENTENCES = [
    "Ada Lovelace met Charles Babbage in London in 1843.",
    "Marie Curie worked at the University of Paris with Pierre Curie.",
    "Émile Zola wrote « J’accuse » for L’Aurore in Paris.",
    "Apple opened a store in Tokyo (東京) next to Sony’s headquarters 🎉.",
    "Zoë Saldaña flew from São Paulo to Zürich\u00a0on\tMonday.",
    "The CEO of Siemens, Roland Busch, visited Munich and Berlin.",
    "Nguyễn Văn An founded Vingroup in Hà Nội.",
    "Björk sang at the Harpa hall in Reykjavík;\n\nthe show sold out.",
]
SCHEMAS = {
    "ent": {"entities": ["person", "organization", "location"], "threshold": 0.3,
            "include_confidence": True, "include_spans": True},
    "ent_plain": {"entities": {"person": {}, "city": {"dtype": "str"}}, "threshold": 0.3},
    "cls": {"classifications": {"sentiment": ["positive", "negative", "neutral"],
                                "topics": {"labels": ["science", "travel", "music", "business"],
                                           "multi_label": True, "cls_threshold": 0.4}},
            "include_confidence": True},
    "json": {"structures": {"visit": ["person::str", "city::list",
                                      "mood::[happy|sad|neutral]::str"]},
             "threshold": 0.3, "include_confidence": True, "include_spans": True},
    "rel": {"relations": ["works_for", "located_in"], "threshold": 0.3,
            "include_confidence": True},
    "rel_plain": {"relations": ["founded", "visited"], "threshold": 0.3},
}  # fmt: skip


def long_text(words: int, seed: int) -> str:
    """About ``words`` words of the sentences above, shuffled, with odd whitespace between."""
    rng = random.Random(seed)
    out, count = [], 0
    while count < words:
        sentence = rng.choice(SENTENCES)
        out.append(sentence + rng.choice([" ", "  ", "\n", " \u2003", "\t"]))
        count += len(sentence.split())
    return "".join(out).rstrip()


def long_cases() -> list[dict]:
    cases = []
    for index, (schema_id, request) in enumerate(SCHEMAS.items()):
        for size_id, words in SIZES.items():
            cases.append({
                "id": f"{schema_id}_{size_id}", "text": long_text(words, index * 7 + words),
                "long": size_id != "w1",
                "request": {**request, "chunk_size": CHUNK, "chunk_overlap": OVERLAP},
            })  # fmt: skip
    return cases


@pytest.fixture(scope="session")
def long_reference(reference_dir: Path) -> dict:
    """gliner2's results for :func:`long_cases` on the package's tiny checkpoint, by dtype
    (``"float32"``, and ``"bfloat16"``: the library's own bf16 run) and case id."""

    def build(target: Path) -> None:
        cases = target / "long_cases.json"
        cases.write_text(json.dumps(long_cases(), ensure_ascii=False), encoding="utf-8")
        gliner2_env().run(SCRIPT, "--checkpoint", reference_dir / "checkpoint",
                          "--cases", cases, "--out", target / "long-results.json",
                          "--bf16-out", target / "long-results-bf16.json")  # fmt: skip

    inputs = [Path(__file__), SCRIPT, *KIT_INPUTS, reference_dir / "checkpoint" / "config.json"]
    target = cached_artifact(reference_dir.name + "-long", inputs, build)
    return {
        "float32": json.loads((target / "long-results.json").read_text(encoding="utf-8")),
        "bfloat16": json.loads((target / "long-results-bf16.json").read_text(encoding="utf-8")),
    }


@pytest.fixture(scope="module")
def long_served(extract) -> dict:
    """Every long case served, one request per case, with ``return_windows``."""
    return {
        case["id"]: extract({**case["request"], "text": case["text"], "return_windows": True})
        for case in long_cases()
    }


def _allowed_differences(long_reference: dict, dtype: str) -> int:
    """How many cases may differ from gliner2's fp32 results in ``dtype``: none in fp32; below,
    as many as its own bf16 run changed (x ``library_factor()``, + 1)."""
    if dtype == "float32":
        return 0
    fp32, bf16 = long_reference["float32"], long_reference["bfloat16"]
    changed = sum(bf16[case["id"]]["result"] != fp32[case["id"]]["result"] for case in long_cases())
    return int(allowed_differences(changed))


def _differing(pairs: list[tuple[str, object, object]], limit: float) -> list[str]:
    differing = []
    for where, got, want in pairs:
        try:
            same_result(got, want, limit, where)
        except AssertionError as error:
            differing.append(str(error)[:300])
    return differing


@pytest.mark.parity
def test_long_texts_equal_extract_long(long_served, long_reference, server):
    limit = tolerance(server.dtype).score
    pairs = []
    for case in long_cases():
        want, got = long_reference["float32"][case["id"]], long_served[case["id"]]
        assert got["windows"] == want["windows"] and got["truncated"] is False, case["id"]
        assert want["windows"] > 1 if case["long"] else want["windows"] == 1, case["id"]
        pairs.append((case["id"], got["result"], want["result"]))
    differing = _differing(pairs, limit)
    allowed = _allowed_differences(long_reference, server.dtype)
    assert len(differing) <= allowed, (allowed, differing)


def test_windows_of_several_texts_share_one_request(extract, long_served, long_reference, server):
    """A list of texts (short and windowed) answers as the texts one by one (in fp32 to float
    noise; below, two runs of the server are each within the dtype's tolerance of the library,
    so within twice it of each other, and may differ in twice the cases allowed)."""
    cases = [c for c in long_cases() if c["id"].startswith("ent_")]
    data = {**SCHEMAS["ent"], "chunk_size": CHUNK, "chunk_overlap": OVERLAP}
    together = extract({**data, "text": [c["text"] for c in cases]})
    pairs = [(case["id"], got, extract({**data, "text": case["text"]}))
             for case, got in zip(cases, together, strict=True)]  # fmt: skip
    if server.dtype == "float32":
        for where, got, alone in pairs:
            same_result(got, alone, 1e-5, where)
        return
    differing = _differing(pairs, 2 * tolerance(server.dtype).score)
    assert len(differing) <= 2 * _allowed_differences(long_reference, server.dtype), differing


def _refused(server, data: dict, *names: str) -> None:
    response = server.pooling(data)
    assert response.status_code == 400, response.text
    for name in names:
        assert name in response.text, response.text


def test_long_text_settings_are_bounded(server):
    text = long_text(SIZES["w10"], 1)
    _refused(server, {"text": text, "entities": ["x"], "chunk_size": 0}, "data.chunk_size")
    _refused(server, {"text": text, "entities": ["x"], "chunk_size": 8, "chunk_overlap": 8},
             "data.chunk_overlap")  # fmt: skip
    _refused(server, {"text": text, "entities": ["x"], "long_text": "all"}, "data.long_text")
    # A window the server cannot hold with the schema names the setting to lower.
    _refused(server, {"text": text, "entities": ["x"], "chunk_size": 600}, "data.chunk_size")
    # More windows than VLLM_FACTORY_MAX_WINDOWS (512), refused before any is tokenized.
    _refused(server, {"text": [text] * 4, "entities": ["x"], "chunk_size": 2, "chunk_overlap": 1},
             "data.text", "VLLM_FACTORY_MAX_WINDOWS")  # fmt: skip


def test_truncate_reads_the_start_and_error_refuses(server, extract):
    text = long_text(SIZES["w2_5"], 2)
    data = {**SCHEMAS["ent"], "text": text}
    _refused(server, {**data, "long_text": "error"}, "data.text", "--max-model-len")
    cut = extract({**data, "long_text": "truncate", "return_windows": True})
    assert cut["windows"] == 1 and cut["truncated"] is True
    assert set(cut["result"]) == {"entities"}
    ends = [s["end"] for spans in cut["result"]["entities"].values() for s in spans]
    read = max(ends, default=0)
    assert read < len(text)
    plain = extract({**data, "long_text": "truncate"})
    assert plain == cut["result"]  # without return_windows: the result alone, today's shape
