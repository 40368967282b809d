import math

import pytest
from pydantic import ValidationError
from vllm_factory.core.request import describe_validation_error
from vllm_factory.heads.gliner.request import MAX_LABELS_PER_REQUEST, GLiNERRequest


def field_of(data: dict) -> str:
    with pytest.raises(ValidationError) as info:
        GLiNERRequest.model_validate(data)
    return describe_validation_error(info.value)[0]


def test_defaults():
    request = GLiNERRequest.model_validate({"text": "a b", "labels": ["x"]})
    assert (request.threshold, request.flat_ner, request.multi_label) == (0.5, True, False)
    assert request.texts == ["a b"] and not request.return_scores


def test_integer_thresholds_accepted():
    assert (
        GLiNERRequest.model_validate({"text": "a", "labels": ["x"], "threshold": 1}).threshold == 1
    )


@pytest.mark.parametrize(
    ("data", "field"),
    [
        ({"text": "a", "labels": []}, "data.labels"),
        ({"text": "a", "labels": [""]}, "data.labels"),
        ({"text": "a", "labels": ["x", " "]}, "data.labels"),
        ({"text": "a", "labels": ["x"] * (MAX_LABELS_PER_REQUEST + 1)}, "data.labels"),
        ({"text": "a", "labels": "x"}, "data.labels"),
        ({"text": "a", "labels": [1]}, "data.labels"),
        ({"text": "a", "labels": ["x"], "threshold": 1.01}, "data.threshold"),
        ({"text": "a", "labels": ["x"], "threshold": -0.5}, "data.threshold"),
        ({"text": "a", "labels": ["x"], "threshold": math.nan}, "data.threshold"),
        ({"text": "a", "labels": ["x"], "threshold": math.inf}, "data.threshold"),
        ({"text": "a", "labels": ["x"], "threshold": "0.5"}, "data.threshold"),
        ({"text": 1, "labels": ["x"]}, "data.text"),
        ({"text": ["a", None], "labels": ["x"]}, "data.text"),
        ({"text": "", "labels": ["x"]}, "data.text"),
        ({"text": "\n\t ", "labels": ["x"]}, "data.text"),
        ({"text": [], "labels": ["x"]}, "data.text"),
        ({"labels": ["x"]}, "data.text"),
        ({"text": "a", "labels": ["x"], "flat_ner": "true"}, "data.flat_ner"),
        ({"text": "a", "labels": ["x"], "multi_label": 0}, "data.multi_label"),
        ({"text": "a", "labels": ["x"], "extra": 1}, "data.extra"),
        ({"text": "a", "candidates": []}, "data.candidates"),
        ({"text": "a", "candidates": [{"id": "q", "label": "x"}, {"id": "q", "label": "y"}]},
         "data.candidates"),
        ({"text": "a", "candidates": [{"id": "", "label": "x"}]}, "data.candidates.0.id"),
        ({"text": "a", "candidates": [{"id": 1.0, "label": "x"}]}, "data.candidates.0.id"),
        ({"text": "a", "candidates": [{"id": 1, "label": ""}]}, "data.candidates.0.label"),
        ({"text": "a", "candidates": [{"label": "x"}]}, "data.candidates.0.id"),
        ({"text": "a", "candidates": [{"id": 1, "label": "x"}], "max_labels": 0},
         "data.max_labels"),
        ({"text": "a", "candidates": [{"id": 1, "label": "x"}], "template": 3}, "data.template"),
    ],
)  # fmt: skip
def test_limits_name_the_field(data, field):
    assert field_of(data).startswith(field)


@pytest.mark.parametrize(
    ("data", "field"),
    [
        ({"text": "a"}, "data.labels"),
        ({"text": "a", "labels": ["x"], "candidates": [{"id": 1, "label": "x"}]},
         "data.candidates"),
        ({"text": "a", "labels": ["x"], "max_labels": 2}, "data.max_labels"),
        ({"text": "a", "labels": ["x"], "template": "{label}"}, "data.template"),
    ],
)  # fmt: skip
def test_labels_or_candidates(data, field):
    problem = GLiNERRequest.model_validate(data).labels_problem()
    assert problem is not None and problem[0] == field and problem[1].startswith(field)


def test_the_same_candidate_twice_is_fine():
    same = {"id": "q", "label": "x", "description": "d"}
    request = GLiNERRequest.model_validate({"text": "a", "candidates": [same, dict(same)]})
    assert len(request.candidates) == 2


def test_candidates_keep_extra_fields_and_ids_as_given():
    request = GLiNERRequest.model_validate(
        {
            "text": "a",
            "candidates": [{"id": 7, "label": "x", "kind": "city"}, {"id": "7", "label": "y"}],
        }
    )
    assert request.labels_problem() is None
    assert [c.model_dump(exclude_none=True) for c in request.candidates] == [
        {"id": 7, "label": "x", "kind": "city"}, {"id": "7", "label": "y"},
    ]  # fmt: skip


def test_module_does_not_import_vllm():
    import subprocess
    import sys

    code = (
        "import sys; import vllm_factory.heads.gliner.request, vllm_factory.heads.gliner.prep, "
        "vllm_factory.heads.gliner.decoding, vllm_factory.heads.gliner; "
        "assert 'vllm' not in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_input_spans_shape_and_range_are_checked_against_the_texts():
    def problem(data: dict) -> str | None:
        return GLiNERRequest.model_validate({"labels": ["x"], **data}).input_span_problem()

    assert problem({"text": "ab cd", "input_spans": [[{"start": 0, "end": 5}]]}) is None
    assert problem({"text": ["ab", "cd"], "input_spans": [None, []]}) is None
    for data in [
        {"text": "ab cd", "input_spans": []},
        {"text": ["ab", "cd"], "input_spans": [[]]},
        {"text": "ab cd", "input_spans": [[{"start": 3, "end": 9}]]},
        {"text": "ab cd", "input_spans": [[{"start": 2, "end": 2}]]},
        {"text": "ab cd", "input_spans": [[{"start": -1, "end": 2}]]},
    ]:
        assert problem(data).startswith("data.input_spans")
    assert field_of({"text": "a", "labels": ["x"], "input_spans": [[{"start": 0}]]}).startswith(
        "data.input_spans"
    )


def test_candidate_labels_link_entities_found_by_labels():
    """vLLM Factory 0.2's linking form: types in ``labels``, names in ``candidate_labels``."""
    request = GLiNERRequest.model_validate(
        {"text": "a", "labels": ["company"], "candidate_labels": ["Tesla Inc.", "TSLA"]}
    )
    assert request.labels_problem() is None and request.candidate_labels == ["Tesla Inc.", "TSLA"]


@pytest.mark.parametrize(
    ("data", "field"),
    [
        ({"text": "a", "candidate_labels": ["x"]}, "data.labels"),
        ({"text": "a", "labels": ["x"], "candidate_labels": ["y"], "max_labels": 2},
         "data.max_labels"),
        ({"text": "a", "labels": ["x"] * 1024, "candidate_labels": ["y"] * 1025},
         "data.candidate_labels"),
        ({"text": "a", "candidates": [{"id": 1, "label": "x"}], "candidate_labels": ["y"]},
         "data.labels"),
    ],
)  # fmt: skip
def test_candidate_labels_problems_name_the_field(data, field):
    problem = GLiNERRequest.model_validate(data).labels_problem()
    assert problem is not None and problem[0] == field and problem[1].startswith(field)


@pytest.mark.parametrize("bad", [[], [""], "x", [1], ["y"] * (MAX_LABELS_PER_REQUEST + 1)])
def test_bad_candidate_labels_are_refused_by_field(bad):
    assert field_of({"text": "a", "labels": ["x"], "candidate_labels": bad}).startswith(
        "data.candidate_labels"
    )
