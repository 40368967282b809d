"""The registry of environment variables (``vllm_factory.core.envs``): one entry per variable,
each parsed one way, every bad value refused at start-up naming the variable."""

import pytest
from vllm_factory.core import envs


def test_every_setting_is_named_documented_and_defaults_to_what_it_parses():
    assert envs.REGISTRY and all(name.startswith("VLLM_FACTORY_") for name in envs.REGISTRY)
    for name, setting in envs.REGISTRY.items():
        assert setting.name == name and setting.doc.strip()
        assert name in envs.describe()


def test_unset_or_empty_gives_the_default(monkeypatch):
    for setting in envs.REGISTRY.values():
        monkeypatch.delenv(setting.name, raising=False)
        assert envs.get(setting) == setting.default and not envs.is_set(setting)
        monkeypatch.setenv(setting.name, "  ")
        assert envs.get(setting) == setting.default and not envs.is_set(setting)


@pytest.mark.parametrize(
    ("setting", "raw", "value"),
    [
        (envs.DISABLE_TRITON, "1", True),
        (envs.DISABLE_TRITON, "Yes", True),
        (envs.DISABLE_TRITON, "off", False),
        (envs.GLINER_ROW_BUCKETS, "0", False),  # set off on every device
        (envs.GLINER_SPAN_GRAPHS, "true", True),  # set on on every device
        (envs.GLINER_LSTM_KERNEL, " CUDNN ", "cudnn"),
        (envs.GLINER_LABEL_CACHE, "0", 0),
        (envs.GLINER_LABEL_CACHE, "65_536", 65536),
        (envs.MT5_IN_GRAPH_ATTENTION, "0", False),
        (envs.STATS_DIR, "/tmp/x", "/tmp/x"),
    ],
)
def test_values_parse_one_way(monkeypatch, setting, raw, value):
    monkeypatch.setenv(setting.name, raw)
    assert envs.get(setting) == value and envs.is_set(setting)


@pytest.mark.parametrize(
    ("setting", "raw"),
    [
        (envs.DISABLE_TRITON, "2"),  # was read as "not disabled"
        (envs.GLINER_LSTM_GRAPHS, "maybe"),  # was read as "on"
        (envs.GLINER_LSTM_KERNEL, "1"),  # the removed opt-in
        (envs.GLINER_LABEL_CACHE, "-1"),
        (envs.MAX_REQUEST_CHARS, "many"),
    ],
)
def test_a_bad_value_stops_the_start_up_naming_the_variable(monkeypatch, setting, raw):
    monkeypatch.setenv(setting.name, raw)
    with pytest.raises(ValueError, match=setting.name):
        envs.check_all()


def test_a_former_default_is_said_once(monkeypatch):
    said = []
    monkeypatch.setattr(envs.logger, "warning", lambda message, *args: said.append(message % args))
    envs.say_former_default.cache_clear()
    envs.say_former_default(envs.DEBERTA_IN_GRAPH_ATTENTION)
    envs.say_former_default(envs.DEBERTA_IN_GRAPH_ATTENTION)
    assert len(said) == 1 and envs.DEBERTA_IN_GRAPH_ATTENTION.name in said[0]
