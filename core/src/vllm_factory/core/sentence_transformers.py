"""sentence-transformers' ``Dense`` modules as checkpoints store them (``<n>_Dense/config.json``
and weights in that folder), read and run the same way for every package that serves them
(ColBERT projections, EmbeddingGemma's sentence head). Pure torch; no vLLM.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn
from vllm_factory.core.checkpoint import CheckpointFiles

IDENTITY, TANH = "identity", "tanh"
# sentence-transformers' own Dense defaults to Tanh; PyLate's writes its activation out.
ST_DEFAULT_ACTIVATION = "torch.nn.modules.activation.Tanh"
WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin")


class DenseFormatError(ValueError):
    """A Dense module this project cannot reproduce exactly; the message names file and key."""


@dataclass(frozen=True)
class DenseSpec:
    """One ``Dense`` module: where its weights are and how it is shaped."""

    folder: Path
    in_features: int
    out_features: int
    bias: bool
    activation: str = IDENTITY  # IDENTITY | TANH


def activation_kind(name: str | None) -> str | None:
    """``identity`` / ``tanh`` for the class paths (or short names) checkpoints write; None for
    anything else. A missing activation (PyLate) is the identity."""
    if name is None or str(name).endswith("Identity"):
        return IDENTITY
    if str(name) in ("torch.nn.modules.activation.Tanh", "torch.nn.Tanh", "Tanh"):
        return TANH
    return None


def read_dense(
    files: CheckpointFiles, folder: str, default_activation: str | None = ST_DEFAULT_ACTIVATION
) -> DenseSpec:
    """The Dense module in ``folder`` of the checkpoint; ``default_activation`` stands for a
    config without ``activation_function`` (None: the identity)."""
    path = f"{folder}/config.json"
    config = files.json(path)
    if config is None:
        raise DenseFormatError(f"{path}: (file): missing")
    if config.get("use_residual"):
        raise DenseFormatError(f"{path}: use_residual: residual Dense is not supported")
    activation = config.get("activation_function", default_activation)
    kind = activation_kind(activation)
    if kind is None:
        raise DenseFormatError(f"{path}: activation_function: {activation!r} is not supported")
    weights = files.folder(folder, WEIGHT_FILES)
    if weights is None:
        raise DenseFormatError(f"{folder}: (weights): no model.safetensors or pytorch_model.bin")
    return DenseSpec(
        folder=weights,
        in_features=int(config["in_features"]),
        out_features=int(config["out_features"]),
        bias=bool(config.get("bias", True)),
        activation=kind,
    )


def load_dense_weights(spec: DenseSpec) -> dict[str, torch.Tensor]:
    """``{"weight": ..., "bias": ...}`` of one Dense module, from its own folder."""
    safetensors_path = spec.folder / "model.safetensors"
    if safetensors_path.exists():
        from safetensors.torch import load_file

        state = load_file(str(safetensors_path))
    else:
        state = torch.load(spec.folder / "pytorch_model.bin", map_location="cpu", weights_only=True)
    return {key.removeprefix("linear."): value for key, value in state.items()}


class DenseLayer(nn.Module):
    """``activation(linear(x))`` of one Dense module; :meth:`load` fills it from its folder."""

    def __init__(self, spec: DenseSpec, dtype: torch.dtype | None = None) -> None:
        super().__init__()
        self.spec = spec
        self.linear = nn.Linear(spec.in_features, spec.out_features, bias=spec.bias, dtype=dtype)
        self.activation = nn.Tanh() if spec.activation == TANH else nn.Identity()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.activation(self.linear(x))

    def load(self) -> set[str]:
        """Copy the checkpoint's weights in; the names of the parameters filled."""
        state = load_dense_weights(self.spec)
        loaded = set()
        for name, param in self.linear.named_parameters():
            if name not in state:
                raise DenseFormatError(f"{self.spec.folder.name}: {name}: not in the weights")
            with torch.no_grad():
                param.copy_(state[name].to(param.dtype))
            loaded.add(f"linear.{name}")
        return loaded


def load_dense_stack(layers: nn.ModuleList, prefix: str) -> set[str]:
    """:meth:`DenseLayer.load` for each layer of ``layers`` (an attribute ``prefix`` of the
    head); the parameter names loaded, relative to the head."""
    return {f"{prefix}.{i}.{name}" for i, layer in enumerate(layers) for name in layer.load()}
