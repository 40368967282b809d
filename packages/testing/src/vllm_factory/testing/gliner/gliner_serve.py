"""gliner's own server, ``python -m gliner.serve`` (Ray Serve), as the GLiNER benchmarks' peer.

gliner 0.2.29 ships a server of its own: Ray Serve with dynamic batching, ``torch.compile`` per
precompiled batch size, optional sequence packing and FlashDeBERTa. It is what a GLiNER user
would deploy instead of our plugin, so ``nox -s bench`` runs it beside the plugin on the same
checkpoint and texts (:class:`GlinerServe`, started from the gliner-serve venv,
``requirements-gliner-serve.txt`` on top of the gliner pins, or from ``--ref-python``).

Requests: ``POST /gliner`` with ``{"text", "labels", "threshold"}``; answers
``{"entities": [{"start", "end", "text", "label", "score"}]}``.

Settings, so that both servers run the same model the same way:

- ``--max-model-len`` and ``--max-span-width`` from the checkpoint's ``gliner_config.json``
  (``max_len``, ``max_width``): gliner.serve overrides the checkpoint's word limit with its own
  ``--max-model-len`` (2048 by default), which would let it read words the plugin drops;
- on CPU ``--num-gpus-per-replica 0 --no-compile``: Ray places no replica that asks for a GPU on
  a host without one, and with compile on a 2-core host was still initialising after 10
  minutes;
- on CUDA :data:`GPU_REPLICAS` replicas sharing the one GPU: a replica is bound by one core
  (104 - 110 % CPU at every load on an H200); four served deberta / mt5 / mmbert 512-token
  texts at 124.6 / 205.4 / 227.7 req/s at their peak on the levelled bench checkpoints, one
  19.5 / 13.5 / 39.3 on the earlier, denser ones (not side by side: 2026-11-27 / 26);
  otherwise its defaults (compile on, batch sizes 1 - 32 precompiled: 5 - 7 minutes to start on
  an H200; ``--peer-arg=--no-compile`` starts in under a minute and was no slower);
- ``--peer-arg`` (the bench's) adds gliner.serve flags, e.g. ``--enable-sequence-packing`` or
  ``--enable-flashdeberta`` (the latter needs the ``flashdeberta`` package in its venv).

PolyLoRA (the LoRA bench, :func:`polylora_args`): gliner.serve wraps gliner's encoder with the
``polylora`` package and takes adapters only from its disk cache, a folder of PEFT adapter
folders named in its ``manifest.json`` (:func:`write_polylora_manifest`); a request picks one
with ``"adapter_id"`` in its body (:func:`serve_body`), none meaning the base model.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx
from vllm_factory.testing.gliner.references import REQUIREMENTS
from vllm_factory.testing.refenv import ReferenceEnv
from vllm_factory.testing.server import DEFAULT_ENV, SubprocessServer

KIT = Path(__file__).resolve().parent
SERVE_REQUIREMENTS = KIT / "requirements-gliner-serve.txt"
POLYLORA_REQUIREMENTS = KIT / "requirements-gliner-polylora.txt"
POLYLORA_MANIFEST = "manifest.json"
ROUTE = "/gliner"
# Ray's own switches: no usage report (the hosts are offline), no prompt.
RAY_ENV = {"RAY_USAGE_STATS_ENABLED": "0", "RAY_USAGE_STATS_PROMPT_ENABLED": "0"}
PROBE = {"text": "Ada Lovelace wrote notes in London.", "labels": ["person"], "threshold": 0.5}
# gliner.serve replicas on a CUDA host, each with an equal share of the one GPU (see above);
# a --peer-arg --num-replicas / --num-gpus-per-replica comes later and wins.
GPU_REPLICAS = 4


def gliner_serve_env() -> ReferenceEnv:
    """gliner 0.2.29 with Ray Serve: the venv gliner.serve runs in (CPU bench)."""
    return ReferenceEnv("gliner-serve-0.2.29", [["-r", str(REQUIREMENTS)],
                                                ["-r", str(SERVE_REQUIREMENTS)]])  # fmt: skip


def gliner_polylora_env() -> ReferenceEnv:
    """:func:`gliner_serve_env`'s venv plus ``polylora`` (gliner.serve's ``--enable-polylora``)."""
    return ReferenceEnv(
        "gliner-serve-0.2.29+polylora-0.1.1",
        [["-r", str(REQUIREMENTS)], ["-r", str(SERVE_REQUIREMENTS)],
         ["--no-deps", "-r", str(POLYLORA_REQUIREMENTS)]],
    )  # fmt: skip


def write_polylora_manifest(folder: Path, names: Sequence[str]) -> Path:
    """``folder/manifest.json`` naming the adapter folders ``folder/<name>`` as PolyLoRA's disk
    cache lists them (adapter id = folder name, PEFT's ``default`` adapter inside), so that
    ``--polylora-disk-cache-dir folder`` serves them; PolyLoRA rewrites the file as it uses
    the adapters (their order), keeping the same entries."""
    entries = [{"adapter_id": name, "path": name, "peft_adapter_name": "default"} for name in names]
    path = Path(folder) / POLYLORA_MANIFEST
    path.write_text(json.dumps({"adapters": entries}, indent=2), encoding="utf-8")
    return path


def polylora_args(
    cache_dir: Path, adapters: int, max_rank: int, targets: Sequence[str]
) -> list[str]:
    """gliner.serve flags serving the adapters of ``cache_dir`` (a
    :func:`write_polylora_manifest` folder) with PolyLoRA: ``adapters`` resident at once, ranks
    up to ``max_rank``, on the encoder modules ``targets``."""
    return ["--enable-polylora", "--polylora-disk-cache-dir", str(cache_dir),
            "--polylora-max-gpu-adapters", str(adapters), "--polylora-max-rank", str(max_rank),
            "--polylora-adapter-weight-modules", ",".join(targets)]  # fmt: skip


def model_limits(checkpoint: Path) -> list[str]:
    """gliner.serve flags that keep the checkpoint's own word and span limits."""
    config = json.loads((Path(checkpoint) / "gliner_config.json").read_text(encoding="utf-8"))
    return ["--max-model-len", str(config["max_len"]), "--max-span-width",
            str(config["max_width"])]  # fmt: skip


class GlinerServe(SubprocessServer):
    """``python -m gliner.serve --model CHECKPOINT`` in a subprocess, healthy once it answers
    ``POST /gliner``; stopped with Ray's processes (see :meth:`SubprocessServer.stop`)."""

    log_prefix = "gliner-serve-"
    root_role = "driver"  # it starts Ray and waits; the proxy and the replica do the work

    def __init__(
        self,
        checkpoint: str | Path,
        python: str | Path,
        *,
        device: str,
        dtype: str,
        extra_args: Sequence[str] = (),
        env: dict[str, str] | None = None,
        startup_timeout: float = 1200.0,
        port: int | None = None,
    ) -> None:
        super().__init__()
        self.model = str(checkpoint)
        self.label = "gliner.serve (Ray Serve)"
        self.port = self.lease_port(port)
        self.url = f"http://127.0.0.1:{self.port}"
        self.startup_timeout = startup_timeout
        self.args = [
            str(python), "-m", "gliner.serve", "--model", self.model, "--device", device,
            "--dtype", dtype, "--port", str(self.port), *model_limits(Path(checkpoint)),
        ]  # fmt: skip
        if device == "cpu":
            self.args += ["--num-gpus-per-replica", "0", "--no-compile"]
        else:
            self.args += ["--num-replicas", str(GPU_REPLICAS),
                          "--num-gpus-per-replica", str(1 / GPU_REPLICAS)]  # fmt: skip
        self.args += list(extra_args)
        self.env = {**os.environ, **DEFAULT_ENV, **RAY_ENV, **(env or {})}

    def healthy(self) -> bool:
        return httpx.post(f"{self.url}{ROUTE}", json=PROBE, timeout=10).status_code == 200


def serve_body(
    text: str, labels: list[str], threshold: float, adapter_id: str | None = None
) -> dict[str, Any]:
    """The body of one ``POST /gliner`` (``adapter_id``: a PolyLoRA adapter's)."""
    body: dict[str, Any] = {"text": text, "labels": labels, "threshold": threshold}
    if adapter_id is not None:
        body["adapter_id"] = adapter_id
    return body


def check_answer(answer: dict) -> None:
    """Raises unless ``answer`` is gliner.serve's answer to one text."""
    if not isinstance(answer.get("entities"), list):
        raise TypeError(f"gliner.serve: expected an entity list, got {str(answer)[:300]}")
