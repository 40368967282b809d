"""GLiNER on an mT5 / T5 encoder."""

from vllm_factory.models.mt5_gliner.version import __version__ as __version__

ARCHITECTURE = "MT5GLiNERForSpanNER"
IO_PROCESSOR = "mt5_gliner_io"
MODEL = "model:MT5GLiNER"
IO_PROCESSOR_CLASS = "io_processor:MT5GLiNERIOProcessor"
# gliner runs both through transformers' T5EncoderModel.
GLINER_ENCODER_TYPES = ("mt5", "t5")
