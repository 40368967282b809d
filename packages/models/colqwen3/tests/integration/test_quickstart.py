"""The README's quickstart block for this wheel, run as written on the tiny checkpoint, with a
corpus page for the README's elided image (:mod:`vllm_factory.testing.quickstart`)."""

import base64
import dataclasses
from pathlib import Path

from vllm_factory.testing import quickstart


def test_readme_quickstart_answers_a_page_with_its_token_vectors(checkpoint, corpus, tmp_path):
    quick = quickstart.quickstart("vllm-factory-colqwen3")
    assert quick.data["image"].startswith("data:image/png;base64,")
    page = base64.b64encode(Path(corpus.images[0]).read_bytes()).decode()
    quick = dataclasses.replace(
        quick, data={**quick.data, "image": f"data:image/png;base64,{page}"}
    )
    with quickstart.served(quick, checkpoint, tmp_path) as server:
        assert quickstart.is_token_vectors(quickstart.answer(server, quick))
