"""The ColPali head's shapes, weights and outputs (pure torch)."""

import pytest
import torch
from safetensors.torch import save_file
from vllm_factory.core.checkpoint import CheckpointFiles
from vllm_factory.core.pooler import PoolerRequest
from vllm_factory.heads.colpali.head import (
    ColPaliHead,
    ProjectionShape,
    TokenNormHead,
    is_projection_weight,
    projection_shape,
)


def test_projection_shape_from_safetensors_headers(tmp_path):
    save_file(
        {
            "custom_text_proj.weight": torch.zeros(12, 8),
            "custom_text_proj.bias": torch.zeros(12),
            "language_model.norm.weight": torch.zeros(8),
        },
        tmp_path / "model.safetensors",
    )
    assert projection_shape(CheckpointFiles(str(tmp_path))) == ProjectionShape(8, 12, True)


def test_projection_shape_in_sharded_checkpoints_without_bias(tmp_path):
    save_file({"a.weight": torch.zeros(2)}, tmp_path / "s1.safetensors")
    save_file({"vlm.custom_text_proj.weight": torch.zeros(4, 6)}, tmp_path / "s2.safetensors")
    index = '{"weight_map": {"a.weight": "s1.safetensors", "vlm.custom_text_proj.weight": "s2.safetensors"}}'
    (tmp_path / "model.safetensors.index.json").write_text(index)
    assert projection_shape(CheckpointFiles(str(tmp_path))) == ProjectionShape(6, 4, False)


def test_no_projection_is_an_error(tmp_path):
    save_file({"a.weight": torch.zeros(2)}, tmp_path / "model.safetensors")
    with pytest.raises(ValueError, match="custom_text_proj"):
        projection_shape(CheckpointFiles(str(tmp_path)))


def test_head_projects_normalises_and_keeps_every_token():
    torch.manual_seed(0)
    head = ColPaliHead(ProjectionShape(8, 5, True))
    weight, bias = torch.randn(5, 8), torch.randn(5)
    assert head.load_checkpoint_weights({"weight": weight, "bias": bias}) == {
        "proj.weight",
        "proj.bias",
    }
    hidden = [torch.randn(3, 8), torch.randn(1, 8)]
    outputs = head(hidden, [PoolerRequest(), PoolerRequest()])
    assert [o.shape for o in outputs] == [(3, 5), (1, 5)]
    for h, o in zip(hidden, outputs):
        expected = h @ weight.T + bias
        expected = expected / expected.norm(dim=-1, keepdim=True)
        torch.testing.assert_close(o, expected)


def test_head_refuses_missing_or_misshapen_weights():
    head = ColPaliHead(ProjectionShape(8, 5, False))
    with pytest.raises(ValueError, match="lacks"):
        head.load_checkpoint_weights({})
    with pytest.raises(ValueError, match="checkpoint"):
        head.load_checkpoint_weights({"weight": torch.zeros(5, 7)})
    assert is_projection_weight("vlm.custom_text_proj.weight")
    assert not is_projection_weight("language_model.layers.0.mlp.weight")


def test_token_norm_head_normalises_every_token_into_fresh_storage():
    torch.manual_seed(0)
    head = TokenNormHead(8, dtype=torch.float32)
    assert head.dim == 8 and head.load_checkpoint_weights({}) == set()
    hidden = [torch.randn(3, 8, dtype=torch.float64), torch.randn(1, 8, dtype=torch.float64)]
    outputs = head(hidden, [PoolerRequest(), PoolerRequest()])
    assert [o.shape for o in outputs] == [(3, 8), (1, 8)]
    for h, o in zip(hidden, outputs):
        assert o.dtype == torch.float32 and o.data_ptr() != h.data_ptr()
        torch.testing.assert_close(o, (h / h.norm(dim=-1, keepdim=True)).float())
    with pytest.raises(ValueError, match="unexpected projection"):
        head.load_checkpoint_weights({"weight": torch.zeros(5, 8)})
