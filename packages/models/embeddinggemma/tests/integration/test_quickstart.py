"""The README's quickstart block for this wheel, run as written on the tiny checkpoint
(:mod:`vllm_factory.testing.quickstart`)."""

import dataclasses

from vllm_factory.testing import quickstart

# The README truncates the real model's 768 dimensions to 256; the tiny checkpoint is 128 wide
# and truncates to 64 or 32.
TINY_DIMENSIONS = {256: 64}


def test_readme_quickstart_answers_a_text_with_its_vector(checkpoint, tmp_path):
    quick = quickstart.quickstart("vllm-factory-embeddinggemma")
    size = TINY_DIMENSIONS[quick.data["dimensions"]]
    quick = dataclasses.replace(quick, data={**quick.data, "dimensions": size})
    with quickstart.served(quick, checkpoint, tmp_path) as server:
        vector = quickstart.answer(server, quick)
    assert quickstart.is_vector(vector) and len(vector) == size
