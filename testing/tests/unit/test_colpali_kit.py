"""The ColPali reference kit outside a checkout's layout (found on the GPU host: the testing
kit installed as a wheel, so no ``core/`` folder beside it) and its score bound."""

import math
import subprocess
import sys

import numpy as np
from vllm_factory.testing.colpali.parity import largest_shift, maxsim
from vllm_factory.testing.colpali.references import KIT_INPUTS, image_processing_file


def test_artifact_inputs_exist_wherever_the_kit_is_installed():
    assert image_processing_file().name == "image_processing.py"
    assert image_processing_file().is_file()
    for path in KIT_INPUTS:
        assert path.is_file(), path


def test_the_kit_imports_without_core():
    """nox imports reference modules before any venv has our packages: stdlib only."""
    code = (
        "import sys; sys.modules['vllm_factory.core'] = None; "
        "import vllm_factory.testing.colpali.references"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_a_maxsim_score_moves_at_most_by_the_vector_shifts():
    rng = np.random.default_rng(0)
    unit = lambda x: x / np.linalg.norm(x, axis=1, keepdims=True)
    query, document = unit(rng.normal(size=(5, 16))), unit(rng.normal(size=(9, 16)))
    moved_q = unit(query + 1e-3 * rng.normal(size=query.shape))
    moved_d = unit(document + 1e-3 * rng.normal(size=document.shape))
    bound = largest_shift([moved_q], [query]) + largest_shift([moved_d], [document])
    change = abs(maxsim(moved_q, moved_d) - maxsim(query, document)) / len(query)
    assert 0 < change <= bound
    assert math.isclose(maxsim(query, query), len(query))
