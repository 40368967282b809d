"""Image requests that once froze a ColPali server's API process, held gigabytes or were
answered wrongly, each answered now within its bounds (the ColPali family's ``server`` and
``encode`` fixtures: image URLs allowed from 127.0.0.1 only, the fetch deadline vLLM's
``VLLM_IMAGE_FETCH_TIMEOUT`` of 3 s, small per-image limits). A package's
``tests/integration/test_hostile.py`` star-imports this module."""

from __future__ import annotations

import base64
import io
import json

import httpx
import pytest
from PIL import Image
from vllm_factory.core import envs
from vllm_factory.testing.colpali.fixtures import MAX_PIXELS
from vllm_factory.testing.hosts import settled, silent_host


def b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode("ascii")


def encoded(image: Image.Image, fmt: str) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, format=fmt)
    return buffer.getvalue()


def refused(response: httpx.Response, field: str, words: str) -> None:
    assert response.status_code == 400, response.text
    message = response.json()["error"]["message"]
    assert field in message and words in message, message


@pytest.fixture
def silent():
    """127.0.0.1:port accepting connections and never answering; the sockets it accepted."""
    with silent_host() as host:
        yield host


def test_silent_image_hosts_cost_one_deadline_for_the_whole_request(server, silent):
    """Four URLs on a host that never answers took 110 s to fail, the API server answering
    nothing meanwhile: now they are fetched at once and the request fails at one deadline."""
    url, accepted = silent
    response = server.pooling({"image": [f"{url}/{i}.png" for i in range(4)]})
    refused(response, "data.image.0", "was not fetched within 3 s")
    assert settled(accepted, 4) == 4  # all four fetched together, not one after another
    assert httpx.get(f"{server.url}/health", timeout=10).status_code == 200


@pytest.mark.parametrize(
    "url",
    [
        "http://localhost:9/a.png",  # another name for this machine, not the one allowed
        "http://169.254.169.254/latest/meta-data/iam/",  # cloud metadata
        "http://10.0.0.1/a.png",
        "ftp://127.0.0.1/a.png",
    ],
)
def test_urls_outside_the_media_policy_are_refused_without_a_fetch(server, url):
    response = server.pooling({"image": url})
    assert response.status_code == 400, response.text
    message = response.json()["error"]["message"]
    assert message.startswith("data.image: ") and "HTTPConnectionPool" not in message


def test_a_raw_base64_jpeg_is_an_image(server, encode):
    """Every base64 JPEG starts with ``/9j/``: it was taken for a local path (400)."""
    raw = encoded(Image.new("RGB", (64, 48), (200, 30, 30)), "JPEG")
    assert b64(raw).startswith("/9j/")
    (vectors,) = encode({"image": b64(raw)})
    assert vectors.ndim == 2 and len(vectors) > 4
    assert server.pooling({"image": "data:image/jpeg;base64," + b64(raw)}).status_code == 200


@pytest.mark.parametrize("fmt", ["PPM", "ICO", "TGA"])
def test_formats_off_the_list_are_not_parsed(server, fmt):
    raw = encoded(Image.new("RGB", (16, 16)), fmt)
    refused(server.pooling({"image": b64(raw)}), "data.image", "formats: PNG")


def test_the_pixels_of_a_request_are_bounded_before_any_is_decoded(server):
    """64 images just under the per-image limit (a few KB of PNG each, ~7.7 GB decoded for
    40 Mpx images): refused at the image that goes over the request's pixel budget."""
    side = int(MAX_PIXELS**0.5)
    blank = b64(encoded(Image.new("L", (side, side)), "PNG"))
    budget = envs.REQUEST_MAX_PIXELS.default
    over = budget // (side * side)  # index of the first image over the budget
    response = server.pooling({"image": [blank] * 64})
    refused(response, f"data.image.{over}", "pixels in all")


@pytest.mark.parametrize(
    ("image", "words"),
    [("file:///etc/passwd", "outside"), ("/etc/passwd", "not valid base64")],
)
def test_local_files_outside_the_allowed_folder(server, image, words):
    refused(server.pooling({"image": image}), "data.image", words)


def test_a_text_longer_than_the_server_takes_is_refused_before_vllm(server):
    """A ColPali text is not truncated (as the reference does not): one longer than
    --max-model-len is refused, tokenized only as far as that limit."""
    refused(server.pooling({"text": "word " * 200_000}), "data.text", "--max-model-len")


def test_lone_surrogates_in_a_query_name_the_field(server):
    body = json.dumps({"model": server.model, "data": {"text": "caf\\ud800e"}})
    body = body.replace("\\\\u", "\\u")
    response = httpx.post(f"{server.url}/pooling", content=body.encode(),
                          headers={"content-type": "application/json"}, timeout=60)  # fmt: skip
    refused(response, "data.text", "surrogate")


__all__ = [name for name in dir() if name.startswith("test_") or name == "silent"]
