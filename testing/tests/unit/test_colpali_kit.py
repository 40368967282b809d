"""The ColPali reference kit outside a checkout's layout (found on the GPU host: the testing
kit installed as a wheel, so no ``core/`` folder beside it) and its score bound."""

import math
import subprocess
import sys

from vllm_factory.testing.colpali.parity import score_limit
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


def test_score_bound_follows_the_vector_tolerance():
    # Two unit vectors at cosine c are sqrt(2 (1 - c)) apart; a dot product moves by the sum.
    assert math.isclose(score_limit(0.99999), 2 * math.sqrt(2e-5))
    assert score_limit(1.0) == 0.0
