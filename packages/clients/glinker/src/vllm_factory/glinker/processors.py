"""The served glinker processors (see the package docstring); glinker's own processor classes
with a component whose ``model`` is a :class:`ServedGLiNER`."""

from __future__ import annotations

from collections.abc import Callable

from pydantic import Field
from vllm_factory.glinker.served import ServedGLiNER

from glinker.core.registry import processor_registry
from glinker.l1.component import L1GlinerComponent
from glinker.l1.models import L1GlinerConfig
from glinker.l1.processor import L1GlinerProcessor
from glinker.l3.component import L3Component
from glinker.l3.models import L3Config
from glinker.l3.processor import L3Processor
from glinker.l4.component import L4Component
from glinker.l4.models import L4Config
from glinker.l4.processor import L4Processor

URL_HELP = "Base URL of the vLLM Factory server, e.g. http://localhost:8000"


class ServedL1Config(L1GlinerConfig):
    url: str = Field(..., description=URL_HELP)


class ServedL3Config(L3Config):
    url: str = Field(..., description=URL_HELP)


class ServedL4Config(L4Config):
    url: str = Field(..., description=URL_HELP)


class ServedL1Component(L1GlinerComponent):
    def _setup(self) -> None:
        self.model = ServedGLiNER(self.config.url, self.config.model, self.config.max_length)
        self._label_embeddings = None  # the server caches label vectors itself


class ServedL3Component(L3Component):
    def _setup(self) -> None:
        self.model = ServedGLiNER(self.config.url, self.config.model_name, self.config.max_length)


class ServedL4Component(L4Component):
    def _setup(self) -> None:
        self.model = ServedGLiNER(self.config.url, self.config.model_name, self.config.max_length)


def _factory(config_class, component_class, processor_class) -> Callable:
    def create(config_dict: dict, pipeline: list | None = None):
        config = config_class(**config_dict)
        return processor_class(config, component_class(config), pipeline)

    return create


# glinker processor name -> (served name, factory).
PROCESSORS = {
    "l1_gliner": ("l1_gliner_vllm", _factory(ServedL1Config, ServedL1Component, L1GlinerProcessor)),
    "l3_batch": ("l3_vllm", _factory(ServedL3Config, ServedL3Component, L3Processor)),
    "l4_reranker": ("l4_vllm", _factory(ServedL4Config, ServedL4Component, L4Processor)),
}


def register() -> list[str]:
    """Register the served processors in glinker's registry (idempotent); their names."""
    for name, factory in PROCESSORS.values():
        processor_registry.register(name)(factory)
    return [name for name, _ in PROCESSORS.values()]
