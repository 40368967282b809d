"""GLiNER2 schema extraction (the ``gliner2`` library's span architecture) on a ModernBERT / mmBERT
encoder. The GLiNER2 heads, request handling and ``--config-format gliner2`` are
vllm-factory-gliner2's; this package brings the encoder."""

from vllm_factory.models.mmbert_gliner2.version import __version__ as __version__

ARCHITECTURE = "MmBertGLiNER2ForExtraction"
IO_PROCESSOR = "mmbert_gliner2_io"
MODEL = "model:MmBertGLiNER2"
IO_PROCESSOR_CLASS = "io_processor:MmBertGLiNER2IOProcessor"
# ModernBERT and mmBERT configs are ModernBertConfig, model_type "modernbert".
GLINER2_ENCODER_TYPES = ("modernbert",)
