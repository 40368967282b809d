"""FactoryModel: vLLM's model interface around a packed encoder (pure torch)."""

import torch
from torch import nn
from vllm_factory.core.model import FactoryModel


class Encoder(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(10, 4)

    def embed_input_ids(self, input_ids: torch.Tensor) -> torch.Tensor:
        return self.embed(input_ids)

    def forward(self, input_ids: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        return self.embed(input_ids) + positions[:, None]


class Plain(FactoryModel):
    def __init__(self) -> None:
        super().__init__()
        self.model = Encoder()


class WithMore(Plain):
    def encode(self, input_ids: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        return super().encode(input_ids, positions) * 2


def test_forward_and_embeddings_go_to_the_encoder() -> None:
    model = Plain()
    ids, positions = torch.tensor([1, 2, 3, 4]), torch.tensor([0, 1, 0, 1])
    torch.testing.assert_close(model(ids, positions), model.model(ids, positions))
    torch.testing.assert_close(model.embed_input_ids(ids), model.model.embed(ids))
    assert FactoryModel.is_pooling_model


def test_encode_is_the_one_hook_and_vllm_arguments_are_accepted() -> None:
    model = WithMore()
    ids, positions = torch.tensor([5, 6]), torch.tensor([0, 1])
    out = model(ids, positions, intermediate_tensors=None, inputs_embeds=None)
    torch.testing.assert_close(out, 2 * model.model(ids, positions))
