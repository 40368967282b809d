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
