"""The shared sentence-transformers Dense reader and layer (pure torch, no vLLM)."""

import json

import pytest
import torch
from safetensors.torch import save_file
from vllm_factory.core.checkpoint import CheckpointFiles
from vllm_factory.core.sentence_transformers import (
    IDENTITY,
    TANH,
    DenseFormatError,
    DenseLayer,
    read_dense,
)


def write_dense(root, config, bias=True):
    folder = root / "2_Dense"
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps({"in_features": 3, "out_features": 2, **config}))
    state = {"linear.weight": torch.arange(6.0).reshape(2, 3)}
    if bias:
        state["linear.bias"] = torch.tensor([0.5, -0.5])
    save_file(state, str(folder / "model.safetensors"))
    return CheckpointFiles(str(root))


@pytest.mark.parametrize(
    "config, default, kind",
    [
        ({}, None, IDENTITY),  # PyLate writes no activation: identity
        ({}, "torch.nn.modules.activation.Tanh", TANH),  # sentence-transformers' default
        ({"activation_function": "torch.nn.modules.linear.Identity"}, None, IDENTITY),
        ({"activation_function": "torch.nn.modules.activation.Tanh"}, None, TANH),
    ],
)
def test_activation_and_shape_are_read(tmp_path, config, default, kind):
    spec = read_dense(write_dense(tmp_path, config), "2_Dense", default_activation=default)
    assert (spec.in_features, spec.out_features, spec.bias, spec.activation) == (3, 2, True, kind)


@pytest.mark.parametrize(
    "config, named",
    [
        ({"activation_function": "torch.nn.modules.activation.ReLU"}, "activation_function"),
        ({"use_residual": True}, "use_residual"),
    ],
)
def test_what_cannot_be_reproduced_is_refused_naming_the_key(tmp_path, config, named):
    files = write_dense(tmp_path, config)
    with pytest.raises(DenseFormatError, match=f"2_Dense/config.json: {named}"):
        read_dense(files, "2_Dense")


def test_layer_loads_the_folder_weights_and_applies_the_activation(tmp_path):
    files = write_dense(tmp_path, {"activation_function": "torch.nn.modules.activation.Tanh"})
    layer = DenseLayer(read_dense(files, "2_Dense"))
    assert layer.load() == {"linear.weight", "linear.bias"}
    x = torch.tensor([[1.0, 0.0, -1.0]])
    expected = torch.tanh(x @ torch.arange(6.0).reshape(2, 3).T + torch.tensor([0.5, -0.5]))
    torch.testing.assert_close(layer(x), expected)


def test_missing_weights_are_named(tmp_path):
    files = write_dense(tmp_path, {"bias": True}, bias=False)
    layer = DenseLayer(read_dense(files, "2_Dense", default_activation=None))
    with pytest.raises(DenseFormatError, match="bias"):
        layer.load()


def test_stack_names_are_relative_to_the_head(tmp_path):
    from torch import nn
    from vllm_factory.core.sentence_transformers import load_dense_stack

    files = write_dense(tmp_path, {})
    layers = nn.ModuleList([DenseLayer(read_dense(files, "2_Dense"))])
    assert load_dense_stack(layers, "dense") == {"dense.0.linear.weight", "dense.0.linear.bias"}
