"""This package's reference: the ColPali family kit on the tiny Qwen3-VL checkpoint of
``build_checkpoint.py`` (colpali-engine 0.3.18's ``ColQwen3`` / ``ColQwen3Processor``, saved in
their own layout) and the ``corpus.json`` beside this file (queries, documents, image specs)."""

from vllm_factory.testing.colpali.references import ColPaliReference, colpali_env

REFERENCE = ColPaliReference(
    __file__,
    model_class="colpali_engine.models:ColQwen3",
    processor_class="colpali_engine.models:ColQwen3Processor",
)
CORPUS, build_checkpoint, reference_dir = REFERENCE.exports()
__all__ = ["CORPUS", "build_checkpoint", "colpali_env", "reference_dir"]
