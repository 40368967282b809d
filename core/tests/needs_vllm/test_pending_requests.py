"""What an IOProcessor keeps between ``pre_process`` and ``post_process``: dropped when the
request's handler ends however it ends (a request that fails in vLLM after pre-processing, or
that its client aborts, never reaches ``post_process``), and never shared by two requests that
name the same ``request_id``."""

import asyncio
from types import SimpleNamespace

import pytest
from pydantic import BaseModel
from vllm_factory.core.io_processor import FactoryIOProcessor


class Echo(BaseModel):
    text: str


class EchoIOProcessor(FactoryIOProcessor[Echo]):
    request_model = Echo

    def __init__(self) -> None:  # no vLLM config: the parts under test only
        import threading
        from collections import OrderedDict

        self._pending = OrderedDict()
        self._pending_lock = threading.Lock()
        self.forgotten: list = []

    def build_prompts(self, request: Echo) -> list[list[int]]:
        return [[len(request.text)]]

    def build_response(self, request: Echo, outputs) -> str:
        return request.text

    def forget(self, request_id) -> None:
        self.forgotten.append(request_id)


def test_answered_request_leaves_nothing():
    io = EchoIOProcessor()

    async def handler() -> str:
        io.pre_process(Echo(text="a"), request_id="r1")
        return io.post_process([SimpleNamespace()], request_id="r1")

    assert asyncio.run(handler()) == "a"
    assert not io._pending and io.forgotten == ["r1"]


@pytest.mark.parametrize("ending", ["fails", "is cancelled"])
def test_a_request_that_never_reaches_post_process_is_dropped_when_its_handler_ends(ending):
    io = EchoIOProcessor()

    async def handler() -> None:
        io.pre_process(Echo(text="x" * 1000), request_id="r2")
        assert "r2" in io._pending
        if ending == "fails":
            raise ValueError("prompt too long (vLLM, after pre_process)")
        await asyncio.sleep(3600)  # the client goes away: the task is cancelled

    async def main() -> None:
        task = asyncio.ensure_future(handler())
        await asyncio.sleep(0)
        if ending == "is cancelled":
            task.cancel()
        with pytest.raises((ValueError, asyncio.CancelledError)):
            await task
        await asyncio.sleep(0)  # done callbacks run on the next loop turn

    asyncio.run(main())
    assert not io._pending and io.forgotten == ["r2"]


def test_a_request_id_in_progress_is_refused_for_another_request():
    from vllm.exceptions import VLLMValidationError

    io = EchoIOProcessor()
    io.pre_process(Echo(text="first"), request_id="same")
    with pytest.raises(VLLMValidationError, match="request_id"):
        io.pre_process(Echo(text="second"), request_id="same")
    assert io.post_process([SimpleNamespace()], request_id="same") == "first"
    io.pre_process(Echo(text="third"), request_id="same")  # free again once answered
    assert io.post_process([SimpleNamespace()], request_id="same") == "third"
