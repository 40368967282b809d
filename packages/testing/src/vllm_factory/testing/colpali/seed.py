"""vLLM Factory 0.2's README for the document-image retrievers (:mod:`vllm_factory.testing.seed`):
its serve command refuses the library's checkpoint in one line naming ``--config-format
colpali``, and with that flag its text and image requests get the token vectors its users read
from ``data``.

A package's ``tests/integration/test_seed_readme.py`` star-imports this module; the fixtures
are the ColPali family's (``checkpoint``, ``colpali_package``, ``corpus``).
"""

from __future__ import annotations

import http.server
import json
import threading
from pathlib import Path

import pytest
from vllm_factory.testing import seed

FLAG = "--config-format colpali"
# The README's requests per model (the image URL is served from this machine in the test).
README_REQUESTS = {
    "colqwen3_io": [
        {"text": "What does the revenue chart show?", "is_query": True},
        {"image": "{image_url}", "is_query": False},
    ],
    "collfm2_io": [{"text": "Summarize the table contents"}],
    "nemotron_colembed_io": [{"text": "Neural network optimization techniques", "is_query": True}],
}


class _Images(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:  # keep the test log quiet
        pass


@pytest.fixture(scope="module")
def image_url(corpus):
    """An http URL of one of the corpus images, served by this process (the README's
    ``https://example.com/document.png``: no internet here)."""
    folder = Path(corpus.images[0]).parent
    handler = lambda *a, **k: _Images(*a, directory=str(folder), **k)
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_port}/{Path(corpus.images[0]).name}"
    httpd.shutdown()


def max_model_len(checkpoint: Path, plugin: str) -> list[str]:
    """The README's ``--max-model-len`` where the tiny checkpoint has the positions for it (the
    real ColQwen3 has 262,144; the tiny one fewer): its own length otherwise."""
    flags = seed.readme_flags(plugin)
    if "--max-model-len" not in flags:
        return []
    config = json.loads((checkpoint / "config.json").read_text())
    positions = (config.get("text_config") or config).get("max_position_embeddings")
    wanted = int(flags[flags.index("--max-model-len") + 1])
    return ["--max-model-len", str(min(wanted, positions))] if positions else []


@pytest.fixture(scope="module")
def readme_colpali(checkpoint, colpali_package):
    """The README's serve command with the flag its refusal names; loopback image URLs
    allowed (the test's image server is on this machine)."""
    more = [*FLAG.split(), *max_model_len(checkpoint, colpali_package.io_processor),
            "--allowed-media-domains", "127.0.0.1"]  # fmt: skip
    env = {"VLLM_FACTORY_MEDIA_ALLOW_PRIVATE": "1"}
    with seed.readme_server(checkpoint, colpali_package.io_processor, *more, env=env) as server:
        yield server


# Where vLLM's own class for the library's config.json cannot load the tiny checkpoint, its
# engine stops before our IOProcessor runs (the server never serves either way).
ENGINE_MAY_FAIL = {
    "colqwen3_io": "vLLM's ColQwen3 wants a projection bias colpali-engine does not save",
    "collfm2_io": "vLLM's LFM2-VL names the SigLIP2 tower's weights otherwise",
    "nemotron_colembed_io": "vLLM's Qwen3-VL wants a video processor the checkpoint lacks",
}


def test_readme_serve_command_refuses_in_one_line_naming_the_flag(checkpoint, colpali_package):
    """The library's config.json names vLLM's own class (or none): without the flag vLLM would
    serve it, answering every request with 400."""
    more = max_model_len(checkpoint, colpali_package.io_processor)
    server = seed.readme_server(checkpoint, colpali_package.io_processor, *more, eager=True)
    seed.assert_refused(server, FLAG, ENGINE_MAY_FAIL.get(colpali_package.io_processor))


def test_readme_requests_get_the_token_vectors(readme_colpali, colpali_package, image_url):
    for data in README_REQUESTS[colpali_package.io_processor]:
        data = {k: (image_url if v == "{image_url}" else v) for k, v in data.items()}
        seed.assert_normalised_token_vectors(seed.post(readme_colpali, data))


def test_a_readme_style_client_ranks_pages_as_the_server_scores_them(
    readme_colpali, corpus, image_url
):
    """One request per query and page, MaxSim over ``data`` in plain Python; the same scores
    as the server's own scoring request."""
    import base64

    query = corpus.queries[0]
    pages = [base64.b64encode(Path(p).read_bytes()).decode() for p in corpus.images[:2]]
    query_vectors = seed.post(readme_colpali, {"text": query, "is_query": True})
    client = [seed.maxsim(query_vectors, seed.post(readme_colpali, {"image": p})) for p in pages]
    served = seed.post(readme_colpali, {"query": query, "images": pages})["scores"]
    seed.assert_same_scores(client, served)


__all__ = [
    name for name in dir()
    if name.startswith("test_") or name in ("image_url", "readme_colpali")
]  # fmt: skip
