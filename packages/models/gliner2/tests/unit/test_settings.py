"""What the server refuses at start-up, naming the config.json key (no vLLM)."""

import pytest
from vllm_factory.models.gliner2.settings import parse_settings

ENCODER = {"hidden_size": 768, "model_type": "deberta-v2"}


def test_published_span_config_is_served():
    config = {"model_type": "extractor", "max_width": 8, "counting_layer": "count_lstm",
              "token_pooling": "first"}  # fmt: skip
    settings = parse_settings(config, ENCODER)
    assert (settings.max_width, settings.hidden_size) == (8, 768)
    migrated = {"architecture": "span", "span_head": {"max_width": 12, "span_mode": "markerV0"}}
    assert parse_settings(migrated, ENCODER).max_width == 12


@pytest.mark.parametrize(("config", "key"), [
    ({"architecture": "boundary"}, "architecture"),
    ({"counting_layer": "count_lstm_moe"}, "counting_layer"),
    ({"token_pooling": "mean"}, "token_pooling"),
    ({"span_head": {"span_mode": "markerV1"}}, "span_mode"),
])  # fmt: skip
def test_unservable_settings_are_refused_naming_the_key(config, key):
    with pytest.raises(ValueError, match=key):
        parse_settings(config, ENCODER)
