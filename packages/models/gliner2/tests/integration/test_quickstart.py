"""The README's quickstart block for this wheel (prep, serve, request), run as written on the
tiny checkpoint (:mod:`vllm_factory.testing.quickstart`)."""

from vllm_factory.testing import quickstart


def test_readme_quickstart_answers_the_schema(reference_dir, tmp_path):
    quick = quickstart.quickstart("vllm-factory-gliner2")
    assert quick.prep is not None
    with quickstart.served(quick, reference_dir / "checkpoint", tmp_path) as server:
        result = quickstart.answer(server, quick)
    schema = quick.data["schema"]
    assert set(result) == {"entities", "relation_extraction"}, result
    assert set(result["entities"]) <= set(schema["entities"])
    assert set(result["relation_extraction"]) == set(schema["relations"])
