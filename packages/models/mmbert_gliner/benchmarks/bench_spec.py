"""mmbert_gliner's benchmark spec for ``nox -s bench -- --plugin mmbert_gliner``: the GLiNER
family's spec (:mod:`vllm_factory.testing.gliner.bench`: requests, gliner baseline, token
counts) on this package's ``reference/build_checkpoint.py --size bench``: ModernBERT hidden
768, 22 layers, 12 heads, alternating global / 128-token sliding-window attention; gliner
hidden 768, max_width 12, max_len 384 words, BiLSTM.
"""

from vllm_factory.testing.gliner.bench import GLiNERBenchSpec

SPEC = GLiNERBenchSpec(__file__)
