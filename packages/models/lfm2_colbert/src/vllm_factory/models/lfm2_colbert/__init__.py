"""LFM2-ColBERT (LiquidAI's LFM2-ColBERT-350M and other PyLate checkpoints on an LFM2
backbone): architecture ``Lfm2ColBERTForRetrieval``, IOProcessor ``lfm2_colbert_io``."""

from vllm_factory.models.lfm2_colbert.version import __version__ as __version__

DISTRIBUTION = "vllm-factory-lfm2-colbert"
ARCHITECTURE = "Lfm2ColBERTForRetrieval"
IO_PROCESSOR = "lfm2_colbert_io"
# What the entry points (plugin.py) register; vLLM imports them lazily.
MODEL = "vllm_factory.models.lfm2_colbert.model:Lfm2ColBERT"
IO_PROCESSOR_CLASS = "vllm_factory.models.lfm2_colbert.io_processor.Lfm2ColBERTIOProcessor"
# Backbone config.json model_type values this package serves (read by --config-format colbert).
COLBERT_BACKBONE_TYPES = ("lfm2",)
