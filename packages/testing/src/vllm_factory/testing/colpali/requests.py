"""The ColPali request suite on the real server: every way of naming an image gives the same
vectors; bad input (undecodable, zero-size, oversized, unreachable or disallowed images; text
and image together, or neither) gets a 400 naming the field; the server stays up."""

from __future__ import annotations

import base64
import functools
import http.server
import io
import random
import socket
import struct
import threading
import zlib

import httpx
import numpy as np
import pytest
from PIL import Image
from vllm_factory.testing.colpali.fixtures import MAX_BYTES, MAX_PIXELS, image_b64, vectors_of

# The tests and the fixture they need (a package test module star-imports this).
__all__ = [
    "http_images",
    "test_bad_requests_name_the_field",
    "test_base64_encoding_is_the_float_matrix",
    "test_every_image_source_gives_the_same_vectors",
    "test_image_limits",
    "test_local_paths_outside_the_allowed_folder_are_refused",
    "test_one_request_many_images_keeps_order",
    "test_scoring_top_k",
    "test_server_survives_bad_requests",
    "test_unreachable_image_url",
]


@pytest.fixture(scope="module")
def http_images(corpus):
    """The test images over http://127.0.0.1 (a local server in a thread)."""
    folder = corpus.images[0].parent
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(folder))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()


def png_bytes(image: Image.Image) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return buffer.getvalue()


def b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode("ascii")


def zero_width_png() -> bytes:
    """A PNG whose header says 0 x 4 pixels (PIL cannot write one)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    header = struct.pack(">IIBBBBB", 0, 4, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IEND", b"")


def test_every_image_source_gives_the_same_vectors(server, encode, corpus, http_images):
    path = corpus.images[1]
    raw = path.read_bytes()
    forms = {
        "base64": b64(raw),
        "data URL": "data:image/png;base64," + b64(raw),
        "http URL": f"{http_images}/{path.name}",
        "path": str(path),
        "file URL": path.resolve().as_uri(),
    }
    results = {name: encode({"image": source})[0] for name, source in forms.items()}
    first = results["base64"]
    for name, vectors in results.items():
        assert vectors.shape == first.shape, name
        np.testing.assert_array_equal(vectors, first, err_msg=name)


def test_one_request_many_images_keeps_order(encode, corpus):
    images = [image_b64(p) for p in corpus.images[:5]]
    together = encode({"image": images})
    alone = [encode({"image": image})[0] for image in images]
    assert [v.shape for v in together] == [v.shape for v in alone]
    for a, b in zip(together, alone):
        np.testing.assert_allclose(a, b, atol=1e-5)


def test_base64_encoding_is_the_float_matrix(server, corpus):
    data = {"image": image_b64(corpus.images[2])}
    floats = vectors_of(server.pooling(data))[0]
    response = server.pooling({**data, "encoding_format": "base64"})
    item = response.json()["data"]  # one image: its item
    assert item["dim"] == floats.shape[1]
    np.testing.assert_array_equal(vectors_of(response)[0], floats)
    # Half the bytes: float16 numbers, the float32 vectors rounded (a second forward, so up to
    # one unit in the last place apart).
    half = server.pooling({**data, "encoding_format": "base64", "embed_dtype": "float16"})
    assert half.json()["data"]["dtype"] == "float16"
    np.testing.assert_allclose(vectors_of(half)[0], floats, rtol=2.0**-10, atol=1e-6)


def test_scoring_top_k(server, corpus):
    images = [image_b64(p) for p in corpus.images[:4]]
    response = server.pooling({"query": corpus.queries[0], "images": images, "top_k": 2})
    assert response.status_code == 200, response.text
    data = response.json()["data"]
    scores = data["scores"]
    assert len(scores) == 4
    best = sorted(range(4), key=lambda i: -scores[i])[:2]
    assert [t["index"] for t in data["top"]] == best


def assert_400(response, field: str) -> None:
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert field in error["message"], error


@pytest.mark.parametrize(
    ("data", "field"),
    [
        ({"text": "a query", "image": "aGVsbG8="}, "data.image"),
        ({}, "data.text"),
        ({"is_query": True}, "data.text"),
        ({"image": "not base64 !"}, "data.image"),
        ({"image": b64(b"definitely not an image")}, "data.image"),
        ({"image": "data:text/plain;base64,aGVsbG8="}, "data.image"),
        ({"image": b64(zero_width_png())}, "data.image"),
        ({"image": ["aGVsbG8=", "still not an image"]}, "data.image.0"),
        ({"image": "", "is_query": False}, "data.image"),
        ({"image": 42}, "data.image"),
        ({"query": "q"}, "data.images"),
        ({"query": "q", "images": ["??"]}, "data.images.0"),
        ({"text": "a", "unknown": 1}, "data.unknown"),
        ({"text": "a query", "embed_dtype": "float16"}, "data.embed_dtype"),
    ],
)
def test_bad_requests_name_the_field(server, data, field):
    assert_400(server.pooling(data), field)


def test_image_limits(server):
    width = int((MAX_PIXELS + 1) ** 0.5) + 1
    too_many_pixels = png_bytes(Image.new("L", (width, width)))  # tiny file, many pixels
    assert_400(server.pooling({"image": b64(too_many_pixels)}), "data.image")
    noise = random.Random(0).randbytes(MAX_BYTES + 1024)
    assert_400(server.pooling({"image": b64(noise)}), "data.image")


def test_local_paths_outside_the_allowed_folder_are_refused(server, checkpoint):
    assert_400(server.pooling({"image": str(checkpoint / "config.json")}), "data.image")
    assert_400(server.pooling({"image": "/etc/hostname"}), "data.image")


def test_unreachable_image_url(server, http_images):
    """A missing file on a live server, and a port nothing listens on."""
    assert_400(server.pooling({"image": f"{http_images}/missing.png"}), "data.image")
    with socket.socket() as probe:  # a port that was free a moment ago
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    assert_400(server.pooling({"image": f"http://127.0.0.1:{port}/x.png"}), "data.image")


def test_server_survives_bad_requests(server, encode, corpus):
    assert httpx.get(f"{server.url}/health", timeout=10).status_code == 200
    assert encode({"text": corpus.queries[0], "is_query": True})[0].ndim == 2
