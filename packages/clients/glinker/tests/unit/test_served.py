"""``ServedGLiNER``: the requests it sends for gliner's arguments, and what it does with the
answers (the server itself is exercised end to end by deberta_gliner's glinker test)."""

import json

import httpx
import pytest
from vllm_factory.glinker.served import ServedGLiNER, ServerError


def served(handler, **kwargs) -> tuple[ServedGLiNER, list[dict]]:
    sent: list[dict] = []

    def record(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        sent.append({"path": request.url.path, **body})
        return handler(body)

    client = httpx.Client(transport=httpx.MockTransport(record))
    return ServedGLiNER("http://server:8000/", "linker", client=client, **kwargs), sent


def entities_for(body: dict) -> httpx.Response:
    data = body["data"]
    out = [[{"start": 0, "end": 1, "text": t[:1], "label": data["labels"][0], "score": 0.9}]
           for t in data["text"]]  # fmt: skip
    return httpx.Response(200, json={"data": out})


def test_predict_entities_sends_gliners_arguments_as_one_pooling_request():
    model, sent = served(entities_for, max_length=512)
    spans = [[{"start": 0, "end": 3}, type("Mention", (), {"start": 4, "end": 7})()]]
    result = model.predict_entities(
        "Ada met Bob", ["person: a human"], threshold=0.3, flat_ner=False, multi_label=True,
        return_class_probs=True, input_spans=spans,
    )  # fmt: skip
    assert result == [{"start": 0, "end": 1, "text": "A", "label": "person: a human",
                       "score": 0.9}]  # fmt: skip
    (request,) = sent
    assert request["path"] == "/pooling" and request["model"] == "linker"
    assert request["data"] == {
        "text": ["Ada met Bob"], "labels": ["person: a human"], "threshold": 0.3,
        "flat_ner": False, "multi_label": True, "return_class_probs": True,
        "input_spans": [[{"start": 0, "end": 3}, {"start": 4, "end": 7}]], "max_len": 512,
        "long_text": "truncate",
    }  # fmt: skip


def test_long_texts_are_cut_as_gliner_cuts_them_unless_told_otherwise():
    for long_text, sent_as in (("truncate", "truncate"), ("window", "window"), (None, None)):
        model, sent = served(entities_for, long_text=long_text)
        model.inference(["a b"], ["x"])
        assert sent[0]["data"].get("long_text") == sent_as


def test_blank_texts_and_empty_labels_never_reach_the_server():
    model, sent = served(entities_for)
    assert model.inference(["", "  "], ["x"]) == [[], []]
    assert model.inference(["a"], []) == [[]]
    out = model.inference(["", "b", " ", "c"], ["x"], input_spans=[[], [], [], None])
    assert [len(e) for e in out] == [0, 1, 0, 1]
    (request,) = sent
    assert request["data"]["text"] == ["b", "c"]
    assert request["data"]["input_spans"] == [[], None]
    assert "max_len" not in request["data"]


def test_server_refusals_and_unsupported_arguments_raise():
    model, _ = served(lambda body: httpx.Response(400, json={"error": "data.labels: too many"}))
    with pytest.raises(ServerError, match="400.*data.labels"):
        model.predict_entities("a", ["x"])
    with pytest.raises(TypeError, match="packing_config"):
        model.inference(["a"], ["x"], packing_config=object())
    assert model.to("cuda") is model and model.config.labels_encoder is None


@pytest.mark.parametrize(("found", "match"), [(None, "pip install"), ("0.2.0", "supports")])
def test_register_says_what_is_missing_in_one_line(monkeypatch, found, match):
    import importlib.metadata

    from vllm_factory.glinker import register

    def version(name: str) -> str:
        assert name == "glinker"
        if found is None:
            raise importlib.metadata.PackageNotFoundError(name)
        return found

    monkeypatch.setattr(importlib.metadata, "version", version)
    with pytest.raises(ImportError, match=match):
        register()
