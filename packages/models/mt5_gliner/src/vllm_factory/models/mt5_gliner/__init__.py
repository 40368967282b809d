"""GLiNER on an mT5 / T5 encoder: architecture ``MT5GLiNERForSpanNER``, IOProcessor
``mt5_gliner_io``."""

from vllm_factory.models.mt5_gliner.version import __version__ as __version__

DISTRIBUTION = "vllm-factory-mt5-gliner"
ARCHITECTURE = "MT5GLiNERForSpanNER"
IO_PROCESSOR = "mt5_gliner_io"
# What the entry points (plugin.py) register; vLLM imports them lazily.
MODEL = "vllm_factory.models.mt5_gliner.model:MT5GLiNER"
IO_PROCESSOR_CLASS = "vllm_factory.models.mt5_gliner.io_processor.MT5GLiNERIOProcessor"
# gliner encoder_config model_type values this package serves (read by vllm-factory-prep):
# gliner runs both through transformers' T5EncoderModel.
GLINER_ENCODER_TYPES = ("mt5", "t5")
