"""mmbert_gliner2's benchmark spec for ``nox -s bench -- --plugin mmbert_gliner2``: the GLiNER2
family's spec (:mod:`vllm_factory.testing.gliner2.bench`) on this package's
``reference/build_checkpoint.py --size bench``: an mmBERT-base-shaped encoder (ModernBERT
hidden 768, 22 layers, 12 heads, alternating global / 128-token sliding-window attention, 8,192
positions; gliner2 max_width 8, count_lstm, first-token pooling), its heads calibrated on the
bench's texts and schema. vLLM has no GLiNER2 head, so there is no native model to compare
with.
"""

from vllm_factory.testing.gliner2.bench import GLiNER2BenchSpec

SPEC = GLiNER2BenchSpec(__file__)
