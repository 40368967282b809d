"""GLiNER2 schema extraction (the ``gliner2`` library's span architecture) on a ModernBERT /
mmBERT encoder: architecture ``MmBertGLiNER2ForExtraction``, IOProcessor ``mmbert_gliner2_io``.
The GLiNER2 heads, request handling and ``--config-format gliner2`` are vllm-factory-gliner2's;
this package brings the encoder."""

from vllm_factory.models.mmbert_gliner2.version import __version__ as __version__

DISTRIBUTION = "vllm-factory-mmbert-gliner2"
ARCHITECTURE = "MmBertGLiNER2ForExtraction"
IO_PROCESSOR = "mmbert_gliner2_io"
# What the entry points (plugin.py) register; vLLM imports them lazily.
MODEL = "vllm_factory.models.mmbert_gliner2.model:MmBertGLiNER2"
IO_PROCESSOR_CLASS = "vllm_factory.models.mmbert_gliner2.io_processor.MmBertGLiNER2IOProcessor"
# encoder_config model_type values this package serves (read by ``--config-format gliner2``).
# ModernBERT and mmBERT configs are ModernBertConfig, model_type "modernbert".
GLINER2_ENCODER_TYPES = ("modernbert",)
