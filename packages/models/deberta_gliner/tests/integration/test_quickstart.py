"""The README's quickstart block for this wheel (prep, serve, request), run as written on the
tiny checkpoint (:mod:`vllm_factory.testing.quickstart`)."""

from vllm_factory.testing import quickstart

ENTITY_KEYS = {"start", "end", "text", "label", "score"}


def test_readme_quickstart_answers_a_text_with_its_entities(reference_dir, tmp_path):
    quick = quickstart.quickstart("vllm-factory-deberta-gliner")
    assert quick.prep is not None
    with quickstart.served(quick, reference_dir / "checkpoint", tmp_path) as server:
        entities = quickstart.answer(server, quick)
    assert isinstance(entities, list) and entities, entities
    text = quick.data["text"]
    for entity in entities:
        assert set(entity) == ENTITY_KEYS, entity
        assert text[entity["start"] : entity["end"]] == entity["text"]
        assert entity["label"] in quick.data["labels"]
        assert entity["score"] >= quick.data["threshold"]
