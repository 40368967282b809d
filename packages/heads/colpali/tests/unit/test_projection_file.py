"""A projection saved apart from the safetensors, in a torch file beside them (sauerkrautlm-colpali's
ColLFM2: ``collfm2_projection.pt``): its shape and tensors (pure torch)."""

import collections
import pickle

import pytest
import torch
from safetensors.torch import save_file
from vllm_factory.core.checkpoint import CheckpointFiles
from vllm_factory.heads.colpali.head import (
    ColPaliHead,
    ProjectionShape,
    projection_file_tensors,
    projection_shape,
    read_projection,
)

NAME = "collfm2_projection.pt"


@pytest.fixture
def checkpoint(tmp_path):
    save_file({"model.language_model.norm.weight": torch.zeros(8)}, tmp_path / "model.safetensors")
    return tmp_path


def save_projection(folder, weight, bias=None):
    state = collections.OrderedDict(weight=weight)
    if bias is not None:
        state["bias"] = bias
    config = {"dim": weight.shape[0], "mask_non_image_embeddings": False}
    torch.save({"custom_text_proj": state, "config": config}, folder / NAME)


def test_shape_and_tensors_from_the_file(checkpoint):
    weight, bias = torch.randn(5, 8), torch.randn(5)
    save_projection(checkpoint, weight, bias)
    files = CheckpointFiles(str(checkpoint))
    assert projection_shape(files, NAME) == ProjectionShape(8, 5, True)
    tensors = projection_file_tensors(files, NAME)
    assert tensors.keys() == {"weight", "bias"}
    assert torch.equal(tensors["weight"], weight) and torch.equal(tensors["bias"], bias)
    head = ColPaliHead(projection_shape(files, NAME))
    assert head.load_checkpoint_weights(tensors) == {"proj.weight", "proj.bias"}


def test_file_read_once_gives_shape_and_tensors(checkpoint, monkeypatch):
    weight = torch.randn(4, 8)
    save_projection(checkpoint, weight)
    loads = []
    real_load = torch.load
    monkeypatch.setattr(torch, "load", lambda *a, **k: loads.append(a) or real_load(*a, **k))
    shape, tensors = read_projection(CheckpointFiles(str(checkpoint)), NAME)
    assert shape == ProjectionShape(8, 4, False) and torch.equal(tensors["weight"], weight)
    assert len(loads) == 1  # the model keeps these tensors for load_weights


def test_safetensors_projection_has_no_file_tensors(tmp_path):
    save_file({"custom_text_proj.weight": torch.zeros(6, 8)}, tmp_path / "model.safetensors")
    assert read_projection(CheckpointFiles(str(tmp_path)), NAME) == (
        ProjectionShape(8, 6, False),
        None,
    )


def test_without_bias(checkpoint):
    save_projection(checkpoint, torch.randn(3, 8))
    assert projection_shape(CheckpointFiles(str(checkpoint)), NAME) == ProjectionShape(8, 3, False)


def test_safetensors_projection_comes_first(tmp_path):
    save_file({"custom_text_proj.weight": torch.zeros(6, 8)}, tmp_path / "model.safetensors")
    save_projection(tmp_path, torch.randn(5, 8))
    assert projection_shape(CheckpointFiles(str(tmp_path)), NAME) == ProjectionShape(8, 6, False)


def test_no_projection_anywhere_is_an_error(checkpoint):
    files = CheckpointFiles(str(checkpoint))
    assert projection_file_tensors(files, NAME) is None
    with pytest.raises(ValueError, match="custom_text_proj"):
        projection_shape(files, NAME)
    with pytest.raises(ValueError, match="custom_text_proj"):
        projection_shape(files)  # no file named: safetensors only


def test_a_file_without_the_projection_is_refused(checkpoint):
    torch.save({"something_else": {"weight": torch.zeros(2, 2)}}, checkpoint / NAME)
    with pytest.raises(ValueError, match="no custom_text_proj"):
        projection_shape(CheckpointFiles(str(checkpoint)), NAME)


class Payload:
    """Not a tensor: unpickling it would run code; ``weights_only`` refuses it."""

    def __reduce__(self):
        return (print, ("unpickled",))


def test_code_in_the_file_is_not_run(checkpoint):
    with open(checkpoint / NAME, "wb") as handle:
        pickle.dump({"custom_text_proj": Payload()}, handle, protocol=2)
    with pytest.raises(pickle.UnpicklingError):
        projection_file_tensors(CheckpointFiles(str(checkpoint)), NAME)
