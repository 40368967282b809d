"""This package's reference: the ColBERT family kit on the tiny LFM2 checkpoint of
``build_checkpoint.py`` and the ``corpus.json`` beside this file. PyLate 1.6 with transformers
5.3.0 has LFM2 (``Lfm2Model``): the family's PyLate venv serves. Batches of one are avoided
(``full_batches``; see the kit's ``colbert_encode.py``)."""

from vllm_factory.testing.colbert.references import ColBERTReference, pylate_env, st_env

REFERENCE = ColBERTReference(__file__, st_layout="native", full_batches=True)
CORPUS, build_checkpoint, reference_dir = REFERENCE.exports()
__all__ = ["CORPUS", "build_checkpoint", "pylate_env", "reference_dir", "st_env"]
