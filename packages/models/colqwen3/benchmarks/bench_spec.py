"""ColQwen3's benchmark spec for ``nox -s bench -- --plugin colqwen3 [--workload queries]``: the
ColPali family's spec (:mod:`vllm_factory.testing.colpali.bench`: generated document pages or
text queries, the plugin and vLLM's native ``ColQwen3Model`` side by side, colpali-engine in
process) with what is ColQwen3's own: colpali-engine's ``ColQwen3Processor`` prompts and
Qwen3-VL's FLOPs.

- Checkpoint: ``reference/build_checkpoint.py --size cpu`` on CPU (text 512 wide, 4 layers;
  vision 256 wide, 4 blocks; at most 256 image tokens: a 768 x 1024 page is 234) and
  ``--size bench`` with ``--device cuda`` (Qwen3-VL-2B's shapes: text 2048 wide, 28 layers, 16
  query / 8 KV heads of 128, MLP 6144; vision 1024 wide, 24 blocks, 16 heads, MLP 4096, patch
  16, merge 2, deepstack after blocks 5, 11, 17; at most 1280 image tokens: a 768 x 1024 page is
  768), colpali-engine's 320-wide projection; random weights.
- FLOPs per request: :func:`vllm_factory.testing.colpali.bench.qwen3_vl_flops` (vision tower
  over the page's patches, language model over prompt and image tokens, projection). For the
  bench model and a 768 x 1024 page (768 image tokens + 12 prompt tokens) that is about
  5.2 TFLOP: vision 2.9, language model 2.3, projection 0.001.
"""

from __future__ import annotations

from vllm_factory.testing.colpali.bench import ColPaliBenchSpec, qwen3_vl_flops

# colpali-engine 0.3.18's ColQwen3Processor (as the package's IOProcessor states them).
IMAGE_PROMPT = (
    "<|im_start|>user\n<|vision_start|><|image_pad|><|vision_end|>"
    "Describe the image.<|im_end|><|endoftext|>"
)
IMAGE_PLACEHOLDER = "<|vision_start|><|image_pad|><|vision_end|>"
QUERY_SUFFIX = "<|endoftext|>" * 10

SPEC = ColPaliBenchSpec(
    __file__,
    image_prompt=IMAGE_PROMPT,
    image_placeholder=IMAGE_PLACEHOLDER,
    query_suffix=QUERY_SUFFIX,
    native_architecture="ColQwen3Model",
    flops=qwen3_vl_flops,
)
