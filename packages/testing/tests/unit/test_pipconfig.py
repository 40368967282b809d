"""pip's configuration as uv variables (what the noxfile and the reference venvs give uv)."""

from vllm_factory.testing.pipconfig import parse_pip_config

LISTED = """\
:env:.find-links='/opt/wheels'
global.constraint='/etc/pip/constraints.txt'
global.extra-index-url='file:///a/simple file:///b/simple'
global.default-timeout='180'
"""


def test_pip_settings_become_uv_variables():
    assert parse_pip_config(LISTED, environ={}) == {
        "UV_FIND_LINKS": "/opt/wheels",
        "UV_CONSTRAINT": "/etc/pip/constraints.txt",
        "UV_EXTRA_INDEX_URL": "file:///a/simple file:///b/simple",
        # pip searches every index for the best version; uv does so only when told
        "UV_INDEX_STRATEGY": "unsafe-best-match",
    }


def test_variables_already_set_win():
    environ = {"UV_CONSTRAINT": "/mine.txt", "UV_INDEX_STRATEGY": "first-index"}
    found = parse_pip_config(LISTED, environ=environ)
    assert "UV_CONSTRAINT" not in found and "UV_INDEX_STRATEGY" not in found
    assert found["UV_FIND_LINKS"] == "/opt/wheels"


def test_no_configuration_gives_nothing():
    assert parse_pip_config("", environ={}) == {}
