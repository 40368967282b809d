"""Long texts read in windows, equal to gliner2's ``extract_long`` (the family suite:
:mod:`vllm_factory.testing.gliner2.long`)."""

from vllm_factory.testing.gliner2.long import *
from vllm_factory.testing.gliner2.long import SCHEMAS, SIZES, long_text


def test_windows_left_to_the_server_fit_what_it_reads(server, extract):
    """Without chunk_size, windows of 384 words (more than the tiny checkpoint's 512 tokens
    hold with the schema) are shrunk until they fit; a chunk_size asked is kept (or refused)."""
    text = long_text(SIZES["w10"], 3)
    data = {**SCHEMAS["ent"], "text": text, "return_windows": True}
    got = extract(data)
    assert got["windows"] > 950 // 384 + 1 and got["truncated"] is False
    spans = [s for found in got["result"]["entities"].values() for s in found]
    assert spans and all(text[s["start"] : s["end"]] == s["text"] for s in spans)
    assert extract(data)["windows"] == got["windows"]  # the same windows again
    assert extract({**data, "chunk_overlap": 8})["windows"] < got["windows"]
    before = server.refusals().get(("data.chunk_size", "over_limit"), 0.0)
    response = server.pooling({**data, "chunk_size": 384})
    assert response.status_code == 400 and "data.chunk_size" in response.text, response.text
    assert server.refusals()[("data.chunk_size", "over_limit")] == before + 1
    short = extract({**data, "text": long_text(SIZES["w1"], 3)})
    assert short["windows"] == 1
