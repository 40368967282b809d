"""ColPali-style retrieval on vision-language backbones: the projection head, the image/text
request handling and the IOProcessor every such package shares (ColQwen3, ...)."""

from vllm_factory.heads.colpali.version import __version__

__all__ = ["__version__"]
