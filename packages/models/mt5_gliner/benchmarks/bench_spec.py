"""mt5_gliner's benchmark spec for ``nox -s bench -- --plugin mt5_gliner``: the GLiNER family's
spec (:mod:`vllm_factory.testing.gliner.bench`) on this package's
``reference/build_checkpoint.py --size bench``: mT5-base's encoder (d_model 768, 12 layers, 12
heads x d_kv 64, gated-GELU d_ff 2048, 32 buckets / max distance 128; gliner hidden 768,
max_width 12, max_len 384 words, BiLSTM). The prompt is ``<<ENT>> person ... <<SEP>> words
</s>``: no CLS, no BOS.
"""

from vllm_factory.testing.gliner.bench import GLiNERBenchSpec

SPEC = GLiNERBenchSpec(__file__)
