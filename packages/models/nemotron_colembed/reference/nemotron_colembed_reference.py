"""This package's reference: the ColPali family kit on the tiny checkpoint of
``build_checkpoint.py`` (transformers' own Qwen3-VL classes saved in NVIDIA's Nemotron ColEmbed
layout) and the ``corpus.json`` beside this file, encoded by ``nemotron_hf.py`` (transformers'
Qwen3-VL run as the hub remote code runs it: bidirectional, no final norm, no projection)."""

from vllm_factory.testing.colpali.references import ColPaliReference, colpali_env
from vllm_factory.testing.refenv import SCRIPTS

REFERENCE = ColPaliReference(
    __file__,
    model_class="nemotron_hf:NemotronColEmbedHF",
    processor_class="nemotron_hf:NemotronColEmbedProcessorHF",
    inputs=["nemotron_hf.py", SCRIPTS / "qwen3_vl_tiny.py"],
)
CORPUS, build_checkpoint, reference_dir = REFERENCE.exports()
__all__ = ["CORPUS", "build_checkpoint", "colpali_env", "reference_dir"]
