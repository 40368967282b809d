"""This package's reference: the ColPali family kit on the tiny LFM2-VL checkpoint of
``build_checkpoint.py`` (sauerkrautlm-colpali 0.1.0's ``ColLFM2`` / ``ColLFM2Processor``, saved
in their own layout) and the ``corpus.json`` beside this file. The encoder loads the checkpoint
through ``collfm2_library.py`` (SDPA attention instead of the library's fixed flash-attention,
the dtype asked for, the saved projection read back). sauerkrautlm-colpali (a colpali-engine
fork, importing only what colpali-engine's pinned stack has) is installed with ``--no-deps`` on
top of the family's venv, in a venv of its own."""

import importlib.util
from pathlib import Path

from vllm_factory.testing.colpali.references import ColPaliReference, colpali_env
from vllm_factory.testing.refenv import ReferenceEnv

LIBRARY = "sauerkrautlm-colpali==0.1.0"


def collfm2_env() -> ReferenceEnv:
    return colpali_env([LIBRARY])


def lfm2_vl_image_processor_file() -> Path:
    """The ColPali head's torch-only LFM2-VL image processor (both sides process images with it on CPU
    hosts): an input of the artifacts, by content."""
    return Path(
        importlib.util.find_spec("vllm_factory.heads.colpali.image_processing_lfm2_vl").origin
    )


REFERENCE = ColPaliReference(
    __file__,
    model_class="collfm2_library:ColLFM2Reference",
    processor_class="sauerkrautlm_colpali.models:ColLFM2Processor",
    env=collfm2_env,
    inputs=["collfm2_library.py", lfm2_vl_image_processor_file()],
)
CORPUS, build_checkpoint, reference_dir = REFERENCE.exports()
__all__ = ["CORPUS", "build_checkpoint", "collfm2_env", "reference_dir"]
