"""deberta_gliner's benchmark spec for ``nox -s bench -- --plugin deberta_gliner``: the GLiNER
family's spec (:mod:`vllm_factory.testing.gliner.bench`) on this package's
``reference/build_checkpoint.py --size bench``: a DeBERTa-v3-base-shaped encoder (hidden 768,
12 layers, 12 heads, 256 position buckets, c2p|p2c, shared keys; gliner hidden 512, max_width
12, max_len 384, BiLSTM, as gliner_multi-v2.1 / gliner_medium-v2.1). vLLM has no DeBERTa, so
there is no native model to compare with.
"""

from vllm_factory.testing.gliner.bench import GLiNERBenchSpec

SPEC = GLiNERBenchSpec(__file__, lora=True)
