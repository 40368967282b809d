"""GLiNER on an mT5 / T5 encoder: architecture ``MT5GLiNERForSpanNER``, IOProcessor
``mt5_gliner_io``."""

from vllm_factory.models.mt5_gliner.version import __version__

ARCHITECTURE = "MT5GLiNERForSpanNER"
IO_PROCESSOR = "mt5_gliner_io"
# gliner encoder_config model_type values this package serves (read by vllm-factory-prep):
# gliner runs both through transformers' T5EncoderModel.
GLINER_ENCODER_TYPES = ("mt5", "t5")

__all__ = ["ARCHITECTURE", "GLINER_ENCODER_TYPES", "IO_PROCESSOR", "__version__"]
