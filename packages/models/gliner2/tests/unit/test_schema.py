"""Request forms -> schema plans, as the library's builder and dict paths make them (no vLLM)."""

import pytest
from vllm_factory.models.gliner2.prompts import choice_prefix, split_words, tasks_of
from vllm_factory.models.gliner2.request import GLiNER2Request
from vllm_factory.models.gliner2.schema import SchemaError


def plan(**data):
    return GLiNER2Request.model_validate({"text": "x", **data}).plan()


def test_short_forms_match_the_schema_dict_form():
    short = plan(entities={"person": "a human", "city": {"threshold": 0.7, "dtype": "str"}})
    full = plan(
        schema={"entities": {"person": "a human", "city": {"threshold": 0.7, "dtype": "str"}}}
    )
    assert short.schema == full.schema and short.entity_metadata == full.entity_metadata
    assert short.entity_metadata["city"] == {"dtype": "str", "threshold": 0.7}
    assert short.schema["entity_descriptions"] == {"person": "a human"}


def test_field_specs_of_extract_json():
    p = plan(
        structures={"deal": ["buyer::str::who buys", "tags", "kind::[a|b]", "size::[s|m]::list"]}
    )
    meta = p.field_metadata
    assert meta["deal.buyer"]["dtype"] == "str"
    assert meta["deal.tags"]["dtype"] == "list"
    assert meta["deal.kind"] == {"dtype": "str", "threshold": None, "choices": ["a", "b"]}
    assert meta["deal.size"]["dtype"] == "list"
    assert p.schema["json_descriptions"] == {"deal": {"buyer": "who buys"}}
    assert choice_prefix(p) == ["(", "deal:", "kind", "(", "a", "|", "b", ")", ",",
                                "size", "(", "s", "|", "m", ")", ")"]  # fmt: skip


def test_build_form_keeps_no_per_item_settings():
    p = plan(schema={"json_structures": [{"s": {"a": "", "b": {"value": "", "choices": ["x", "y"]}}}],
                     "classifications": [], "entities": {"person": ""}, "relations": [],
                     "json_descriptions": {}, "entity_descriptions": {"person": "someone"},
                     "relation_descriptions": {}})  # fmt: skip
    assert p.entity_metadata == {} and p.field_metadata == {} and p.relation_order == []
    assert p.entity_order == ["person"]
    kinds = [(t.kind, t.name, t.fields) for t in tasks_of(p)]
    assert kinds == [("json_structures", "s", ["a", "b"]), ("entities", "entities", ["person"])]


def test_task_order_and_prompt_items():
    p = plan(schema={"relations": {"works_for": "employment"}, "classifications": [
        {"task": "tone", "labels": {"formal": "stiff", "casual": "loose"}}],
        "entities": ["person"], "structures": {"s": {"fields": [{"name": "f",
        "description": "d"}]}}})  # fmt: skip
    tasks = tasks_of(p)
    assert [t.kind for t in tasks] == ["json_structures", "entities", "relations",
                                       "classifications"]  # fmt: skip
    assert tasks[0].items == ["(", "[P]", "s [DESCRIPTION] f: d", "(", "[C]", "f", ")", ")"]
    assert tasks[2].items[2] == "works_for: employment"  # the relation's key keeps it, as in
    assert tasks[2].name == "works_for: employment"  # the library
    assert tasks[3].items[2] == "tone [DESCRIPTION] formal: stiff [DESCRIPTION] casual: loose"
    assert p.relation_order == ["works_for"] and p.classification_tasks == ["tone"]


@pytest.mark.parametrize(("data", "field"), [
    ({}, "data.schema"),
    ({"schema": {"entities": ["a"], "structures": {"entities": {"fields": [{"name": "x"}]}}}},
     "data.schema"),
    ({"schema": {"structures": {"s": {"fields": [{"name": "x", "cardinality": "required_one"}]}}}},
     "data.schema.structures.s.fields[0].cardinality"),
    ({"schema": {"json_structures": [{"s": {"a": 3}}]}}, "data.schema.json_structures[0].s.a"),
    ({"schema": {"json_structures": [], "record_metadata": {}}}, "data.schema.record_metadata"),
    ({"classifications": {"t": {"labels": ["a", "b"], "examples": [["x"]]}}},
     "data.classifications.t.examples[0]"),
])  # fmt: skip
def test_bad_schemas_name_the_field(data, field):
    with pytest.raises(SchemaError) as error:
        plan(**data)
    assert error.value.field == field


def test_words_are_split_and_lower_cased_as_the_library_does():
    words = split_words("Mail ANA@Example.org, see www.x.io/a-b; İstanbul café", max_len=None)
    assert words.text.endswith("café.")
    assert words.tokens == ["mail", "ana@example.org", ",", "see", "www.x.io/a-b;", "i̇stanbul",
                            "café", "."]  # fmt: skip
    assert [words.text[s:e] for s, e in zip(words.starts, words.ends)][5] == "İstanbul"
    assert split_words("What?").text == "What?" and split_words("").text == "."
    assert len(split_words("a b c d", max_len=2).tokens) == 2
