"""GLiNER span-NER head, gliner-exact request handling and checkpoint prep for vLLM Factory.

Importing this package never imports vLLM: ``model.py`` and ``io_processor.py`` do.
"""

from vllm_factory.heads.gliner.head import GLiNERSpanHead
from vllm_factory.heads.gliner.settings import GLiNERSettings, parse_settings, read_settings
from vllm_factory.heads.gliner.version import __version__

__all__ = ["GLiNERSettings", "GLiNERSpanHead", "__version__", "parse_settings", "read_settings"]
