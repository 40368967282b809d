"""The compiled path, on CPU: a server in vLLM's default mode (no ``--enforce-eager``), so
vLLM traces our ModernBERT encoder with ``torch.compile`` (Inductor on CPU) and splits it at
vLLM's attention, as a GPU server does before it captures CUDA graphs. Documents run the
compiled path; queries, whose expansion tokens PyLate hides as keys, the eager masked path of
the same model. Both must still match PyLate."""

import pytest
from vllm_factory.testing.colbert.fixtures import encoder
from vllm_factory.testing.parity import check_vectors
from vllm_factory.testing.server import VllmServer, assert_compiled


@pytest.fixture(scope="module")
def compiled_server(checkpoint, colbert_package):
    with VllmServer(
        checkpoint,
        io_processor_plugin=colbert_package.io_processor,
        hf_overrides={"architectures": [colbert_package.architecture]},
        enforce_eager=False,
    ) as running:
        yield running


def test_vllm_compiled_the_encoder(compiled_server):
    assert_compiled(compiled_server)


@pytest.mark.parity
@pytest.mark.parametrize("part", ["queries", "documents"])
def test_compiled_server_matches_pylate(compiled_server, reference, corpus, colbert_package, part):
    served = encoder(compiled_server)(corpus[part], is_query=part == "queries")
    library = colbert_package.libraries[0]
    expected = reference(library)[part]
    check_vectors(compiled_server, colbert_package.name, f"compiled/{part}", served, expected)
