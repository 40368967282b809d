"""An IOProcessor refuses to start, in one line naming the flag to add, when vLLM loaded the
checkpoint as another class than the one whose outputs it reads (vLLM picks the class from
config.json before any plugin sees ``--io-processor-plugin``; such a server would answer every
request with 400)."""

import logging
from types import SimpleNamespace

import pytest
from vllm_factory.core.io_processor import FactoryIOProcessor, UnservedArchitectureError


class ColBERTLike(FactoryIOProcessor):
    architecture = "ModernColBERTForRetrieval"
    selected_by = "--config-format colbert"


class EmbeddingLike(FactoryIOProcessor):
    architecture = "EmbeddingGemmaForEmbedding"


def model_config(architectures, plugin="moderncolbert_io"):
    return SimpleNamespace(
        hf_config=SimpleNamespace(architectures=architectures),
        io_processor_plugin=plugin,
        model="/models/colbert",
    )


def check(cls, config):
    cls.__new__(cls).check_architecture(config)


def test_the_served_architecture_passes():
    check(ColBERTLike, model_config(["ModernColBERTForRetrieval"]))
    check(FactoryIOProcessor, model_config(["Anything"]))  # no architecture: no check


def test_another_class_is_refused_in_one_line_naming_the_flag(caplog):
    with caplog.at_level(logging.ERROR), pytest.raises(UnservedArchitectureError) as info:
        check(ColBERTLike, model_config(["ModernBertModel"]))
    message = str(info.value)
    assert "\n" not in message
    assert message == (
        "moderncolbert_io reads the outputs of ModernColBERTForRetrieval, but vLLM loaded "
        "/models/colbert as ModernBertModel (from its config.json): add --config-format colbert "
        "to the vllm serve command"
    )
    assert message in caplog.text


def test_without_a_family_flag_the_hf_overrides_that_select_it_are_named():
    with pytest.raises(UnservedArchitectureError) as info:
        check(EmbeddingLike, model_config(["Gemma3TextModel"], plugin=None))
    assert str(info.value).startswith("EmbeddingLike reads the outputs of ")
    assert """add --hf-overrides '{"architectures": ["EmbeddingGemmaForEmbedding"]}' to""" in str(
        info.value
    )
