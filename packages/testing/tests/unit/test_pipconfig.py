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


def test_an_interpreter_without_pip_reads_the_hosts_pip_on_path(monkeypatch):
    """A venv uv made has no pip: ``python -m pip`` fails, and the pip on PATH reads the same
    host files and variables (a CUDA torch was installed once for lack of this)."""
    import subprocess

    from vllm_factory.testing import pipconfig

    asked = []

    def run(command, **_):
        asked.append(command)
        if command[1:3] == ["-m", "pip"]:
            return subprocess.CompletedProcess(command, 1, "", "No module named pip")
        return subprocess.CompletedProcess(command, 0, "global.find-links='/wheels'\n", "")

    monkeypatch.setattr(pipconfig.subprocess, "run", run)
    monkeypatch.delenv("UV_FIND_LINKS", raising=False)
    assert pipconfig.pip_settings_for_uv("/venv/bin/python") == {"UV_FIND_LINKS": "/wheels"}
    assert asked[0][:3] == ["/venv/bin/python", "-m", "pip"] and asked[1][-2:] == ["config", "list"]
