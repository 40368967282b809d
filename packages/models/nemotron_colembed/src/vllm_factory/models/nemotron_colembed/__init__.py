"""Nemotron ColEmbed (NVIDIA's ``Qwen3VLNemotronEmbedModel``: a bidirectional Qwen3-VL whose token
vectors are its last layer's hidden states, L2-normalised) for vLLM."""

from typing import Any

from vllm_factory.models.nemotron_colembed.version import __version__ as __version__

ARCHITECTURE = "NemotronColEmbedForRetrieval"
IO_PROCESSOR = "nemotron_colembed_io"
MODEL = "model:NemotronColEmbed"
IO_PROCESSOR_CLASS = "io_processor:NemotronColEmbedIOProcessor"
# Checkpoint config.json model_type values this package serves (read by --config-format colpali).
COLPALI_BACKBONE_TYPES = ("qwen3_vl_nemotron_embed",)
# How --config-format colpali serves such a config.json: as transformers' own Qwen3-VL config
# (the model type names NVIDIA's remote subclass, which adds only ``pooling``), without the
# remote code's auto_map, and with bidirectional attention declared before vLLM decides the
# attention type of the model and of each layer.
COLPALI_CONFIG_UPDATE: dict[str, Any] = {
    "model_type": "qwen3_vl",
    "auto_map": None,
    "is_causal": False,
    "text_config": {"is_causal": False},
}
