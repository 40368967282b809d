"""gliner2's benchmark spec for ``nox -s bench -- --plugin gliner2``: the GLiNER2 family's spec
(:mod:`vllm_factory.testing.gliner2.bench`) on this package's ``reference/build_checkpoint.py
--size bench``: a DeBERTa-v3-base-shaped encoder (hidden 768, 12 layers, 12 heads, 256
position buckets; gliner2 max_width 8, count_lstm, first-token pooling, as
fastino/gliner2-base-v1), its heads calibrated on the bench's texts and schema. vLLM has no
DeBERTa and no GLiNER2 head, so there is no native model to compare with.
"""

from vllm_factory.testing.gliner2.bench import GLiNER2BenchSpec

SPEC = GLiNER2BenchSpec(__file__, lora=True)
