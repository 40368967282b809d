"""The README's quickstart block for this wheel, run as written on the tiny checkpoint
(:mod:`vllm_factory.testing.quickstart`)."""

from vllm_factory.testing import quickstart


def test_readme_quickstart_answers_a_query_with_its_token_vectors(checkpoint, tmp_path):
    quick = quickstart.quickstart("vllm-factory-moderncolbert")
    assert quick.data["is_query"] is True
    with quickstart.served(quick, checkpoint, tmp_path) as server:
        assert quickstart.is_token_vectors(quickstart.answer(server, quick))
