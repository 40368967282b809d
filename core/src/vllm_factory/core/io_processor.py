"""Base class for every vllm-factory IOProcessor plugin.

A subclass declares a pydantic ``request_model`` and writes two task-specific steps:
``build_prompts`` (validated request -> token prompts) and ``build_response`` (pooler
outputs -> JSON); ``setup`` reads the checkpoint's settings once at server start.
Validation, error mapping and vLLM-version differences are handled here.

A package names the architecture its IOProcessor serves (``architecture``) and its family how a
user selects it for a checkpoint whose ``config.json`` names another class (``selected_by``,
e.g. ``--config-format colbert``). vLLM resolves the architecture from ``config.json`` before
any plugin sees the command line, so ``--io-processor-plugin`` alone cannot select it; a server
whose model is another class would answer every request with 400. The IOProcessor therefore
refuses to start there, in one line naming the flag to add.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any, ClassVar, Generic, TypeVar

import numpy as np
from pydantic import BaseModel, ValidationError
from vllm.plugins.io_processors.interface import IOProcessor
from vllm_factory.core import compat, metrics
from vllm_factory.core.checkpoint import CheckpointFiles
from vllm_factory.core.request import describe_validation_error, lone_surrogate_path

logger = logging.getLogger(__name__)

RequestT = TypeVar("RequestT", bound=BaseModel)

# Validated requests wait here between pre_process and post_process (same API process). An
# entry is dropped when its request's handler ends however it ends (answered, failed in vLLM
# after pre_process, or aborted by the client); the bound is for callers without a handler task
# (offline use).
MAX_PENDING_REQUESTS = 4096


class UnservedArchitectureError(RuntimeError):
    """The server's model is not the architecture this IOProcessor serves."""


class FactoryIOProcessor(IOProcessor, Generic[RequestT]):
    """Validates ``data``, builds token prompts, and shapes pooler outputs into JSON."""

    request_model: ClassVar[type[BaseModel]]
    # The model class (registered architecture) whose outputs this IOProcessor reads; a model
    # package sets it. Empty: no check (an IOProcessor shared by several architectures).
    architecture: ClassVar[str] = ""
    # The ``vllm serve`` flag that selects ``architecture`` for a checkpoint as its library
    # saved it (a family's ``--config-format``); empty: ``--hf-overrides`` naming it.
    selected_by: ClassVar[str] = ""

    def __init__(self, vllm_config: Any, renderer: Any = None) -> None:
        super().__init__(vllm_config, renderer)  # same signature in vLLM 0.26 - 0.32
        model_config = vllm_config.model_config
        self.check_architecture(model_config)
        self.checkpoint = CheckpointFiles(
            model_config.model, revision=getattr(model_config, "revision", None)
        )
        self.max_model_len: int = model_config.max_model_len
        self._pending: OrderedDict[str | None, BaseModel] = OrderedDict()
        self._pending_lock = threading.Lock()
        self.setup()

    def check_architecture(self, model_config: Any) -> None:
        """Refuse to start (one line naming the flag to add) when vLLM loaded the checkpoint as
        another class than :attr:`architecture`."""
        if not self.architecture:
            return
        served = list(getattr(model_config.hf_config, "architectures", None) or [])
        if self.architecture in served:
            return
        plugin = getattr(model_config, "io_processor_plugin", None) or type(self).__name__
        flag = self.selected_by or (
            f'--hf-overrides \'{{"architectures": ["{self.architecture}"]}}\''
        )
        loaded = served[0] if served else "no architecture"
        message = (
            f"{plugin} reads the outputs of {self.architecture}, but vLLM loaded "
            f"{model_config.model} as {loaded} (from its config.json): add {flag} to the "
            "vllm serve command"
        )
        logger.error(message)
        raise UnservedArchitectureError(message)

    # -- subclass hooks -------------------------------------------------------------

    def setup(self) -> None:
        """Read tokenizer and checkpoint settings once, at server start."""

    def build_prompts(self, request: RequestT) -> list[list[int] | dict]:
        """Every sequence this request sends to the engine: its token ids, or a prompt dict
        (``{"prompt_token_ids": [...], "multi_modal_data": {...}}`` for images)."""
        raise NotImplementedError

    def build_response(self, request: RequestT, outputs: Sequence[Any]) -> Any:
        """JSON-ready response from the engine's ``PoolingRequestOutput`` list."""
        raise NotImplementedError

    # -- vLLM IOProcessor interface ------------------------------------------------------

    def parse_data(self, data: object) -> RequestT:
        if data is None:
            raise compat.validation_error("data: field required", "data")
        where = lone_surrogate_path(data)
        if where is not None:  # JSON allows "\ud800"; no tokenizer or encoder takes it
            raise compat.validation_error(
                f"{where}: holds a lone UTF-16 surrogate (not a Unicode character)", where
            )
        try:
            return self.request_model.model_validate(data)  # type: ignore[return-value]
        except ValidationError as error:
            field, message = describe_validation_error(error)
            raise compat.validation_error(message, field) from None

    def merge_pooling_params(self, params: Any = None) -> Any:
        if params is not None and getattr(params, "task", None) not in (None, "plugin"):
            return params
        return compat.plugin_pooling_params()

    def pre_process(
        self, prompt: RequestT, request_id: str | None = None, **kwargs: Any
    ) -> list[dict]:
        if request_id is not None:
            with self._pending_lock:
                taken = request_id in self._pending
            if taken:  # a client may name its request; two at once would get each other's data
                raise compat.validation_error(
                    "request_id: a request with this id is in progress on this server",
                    "request_id",
                )
        prompts = [
            p if isinstance(p, dict) else {"prompt_token_ids": p}
            for p in self.build_prompts(prompt)
        ]
        with self._pending_lock:
            self._pending[request_id] = prompt
            while len(self._pending) > MAX_PENDING_REQUESTS:
                self.forget(self._pending.popitem(last=False)[0])
        task = _handler_task()
        if task is not None:
            task.add_done_callback(lambda _task: self._drop(request_id))
        return prompts

    def post_process(
        self, model_output: Sequence[Any], request_id: str | None = None, **kwargs: Any
    ) -> Any:
        with self._pending_lock:
            request = self._pending.pop(request_id, None)
        if request is None:
            raise RuntimeError(f"no pending request {request_id!r} to post-process")
        answering = _ANSWERING_SERVER.set(request_id is not None)  # vLLM's server names its own
        try:
            return self.build_response(request, model_output)
        finally:
            _ANSWERING_SERVER.reset(answering)

    def forget(self, request_id: str | None) -> None:
        """Drop what a subclass keeps for ``request_id`` beside the pending request (its
        handler ended, or the pending map is full)."""

    def _drop(self, request_id: str | None) -> None:
        with self._pending_lock:
            self._pending.pop(request_id, None)
        self.forget(request_id)


def budget_check(field: str, amount: int, limit: int, unit: str, setting: str, advice: str) -> None:
    """A 400 naming ``field`` when a request holds more than ``limit`` ``unit`` (a server budget,
    ``setting``), before any of that work is done."""
    if amount > limit:
        raise compat.validation_error(
            f"{field}: this request holds {amount} {unit}, more than this server takes in one "
            f"request ({setting}={limit}); {advice}",
            field,
            metrics.OVER_LIMIT,
        )


# Whether the response being built goes to vLLM's OpenAI server (post_process with a request
# id) rather than to an offline caller; set around build_response, which may run on a thread of
# vLLM's executor.
_ANSWERING_SERVER: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "vllm_factory_answering_server", default=False
)


def json_array(values: np.ndarray) -> np.ndarray | list:
    """``values`` for a JSON response: the array itself when ``build_response`` answers the
    server and vLLM's renderer writes arrays (:func:`compat.json_renders_numpy`), as vLLM's own
    ``/v1/embeddings`` does; a list otherwise (offline, or the standard library's encoder).
    Either way the client reads the same numbers: orjson writes a float32 in its shortest form,
    which parses back to that float32."""
    if _ANSWERING_SERVER.get() and compat.json_renders_numpy():
        return np.ascontiguousarray(values)  # orjson writes C-ordered arrays only
    return values.tolist()


def _handler_task() -> asyncio.Task | None:
    """The asyncio task handling the current request, when pre-processing runs in one (vLLM's
    API server calls IOProcessors on its event loop); None offline."""
    try:
        return asyncio.current_task()
    except RuntimeError:  # no running event loop
        return None
