"""Generated and hostile ColPali bodies against the family's server
(:mod:`vllm_factory.testing.fuzz`); a package's ``tests/integration/test_fuzz.py``
star-imports this module."""

from __future__ import annotations

import base64
import io

import numpy as np
from PIL import Image
from vllm_factory.heads.colpali.request import ColPaliRequest
from vllm_factory.testing.colpali.fixtures import MAX_PIXELS
from vllm_factory.testing.fuzz import request_bodies, run_fuzz


def _b64(image: Image.Image, fmt: str = "PNG") -> str:
    buffer = io.BytesIO()
    image.save(buffer, format=fmt)
    return base64.b64encode(buffer.getvalue()).decode("ascii")


SIDE = int(MAX_PIXELS**0.5)
VALID = {"text": "What does the revenue chart show?", "is_query": True}
HOSTILE = [
    {"image": [_b64(Image.new("L", (SIDE, SIDE)))] * 64},
    {"image": ["http://169.254.169.254/latest/meta-data/"] * 64},
    {"image": ["http://localhost:1/a.png"] * 64},
    {"image": "file:///etc/passwd"},
    {"image": "/etc/passwd"},
    {"image": _b64(Image.new("RGB", (8, 8)), "PPM")},
    {"image": _b64(Image.new("RGB", (8, 8)), "JPEG")},
    {"text": "word " * 200_000},
    {"query": "q", "images": [_b64(Image.new("RGB", (8, 8)))] * 64, "top_k": 0},
]  # fmt: skip


def test_generated_and_hostile_bodies(server):
    run_fuzz(server, request_bodies(ColPaliRequest, VALID), VALID, HOSTILE,
             compare=lambda a, b: np.allclose(a, b, atol=1e-5), name="colpali")  # fmt: skip


__all__ = ["test_generated_and_hostile_bodies"]
