"""vLLM's /pooling answers go through orjson where every plugin is installed (orjson is a
dependency of vllm-factory-core). Without it vLLM falls back to the standard library's JSON
encoder, which spent 2 ms per base64 ColBERT document on the single thread that also tokenizes
(63-79 % of that thread's samples under load on the H100 host)."""

import orjson
from vllm.entrypoints.pooling.utils import get_json_response_cls


def test_vllm_picks_orjson_for_pooling_responses():
    cls = get_json_response_cls()
    assert cls.__name__ == "ORJSONResponse"
    body = cls(content={"data": [{"embeddings": "QUJD", "num_tokens": 1}]}).body
    assert orjson.loads(body) == {"data": [{"embeddings": "QUJD", "num_tokens": 1}]}


def test_vectors_reach_the_renderer_as_arrays_only_when_answering_the_server():
    """A response built for vLLM's server (post_process with a request id) hands its vectors to
    orjson as arrays (as vLLM's own /v1/embeddings does); offline they stay lists. The client
    reads the same float32s."""
    import numpy as np
    from pydantic import BaseModel
    from vllm.entrypoints.pooling.pooling.protocol import IOProcessorResponse
    from vllm_factory.core import compat
    from vllm_factory.core.io_processor import FactoryIOProcessor, json_array

    values = (np.arange(8, dtype=np.float32).reshape(4, 2) / 3)[:, :1]  # not C-contiguous

    class Text(BaseModel):
        text: str = "a"

    class Vectors(FactoryIOProcessor[Text]):
        def __init__(self) -> None:  # no server config: only the pending-request steps
            import threading
            from collections import OrderedDict

            self._pending, self._pending_lock = OrderedDict(), threading.Lock()

        def build_prompts(self, request: Text) -> list[list[int]]:
            return [[1, 2]]

        def build_response(self, request: Text, outputs: object) -> object:
            return json_array(values)

    processor = Vectors()
    assert compat.json_renders_numpy()
    processor.pre_process(Text())
    offline = processor.post_process([])
    assert isinstance(offline, list) and offline == values.tolist()
    processor.pre_process(Text(), request_id="pool-1")
    served = processor.post_process([], request_id="pool-1")
    assert isinstance(served, np.ndarray) and served.flags.c_contiguous
    assert isinstance(json_array(values), list)  # outside post_process
    response = IOProcessorResponse(request_id="r", data={"embeddings": served})
    body = get_json_response_cls()(content=response.model_dump()).body
    read = np.asarray(orjson.loads(body)["data"]["embeddings"], dtype=np.float32)
    assert np.array_equal(read, values)
