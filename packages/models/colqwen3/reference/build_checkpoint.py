"""Build a small, seeded, offline ColQwen3 checkpoint (colpali-engine's own classes and layout).

Runs in the ColPali reference venv (no hub access needed):

    python build_checkpoint.py --out DIR [--seed 0] [--size tiny|cpu|bench] [--corpus corpus.json]

Steps (the tokenizer, config and processors from the kit's ``qwen3_vl_tiny``, the corpus texts
and reload checks from its ``colpali_checkpoint``): a byte-level BPE tokenizer with Qwen2's
pre-tokenisation and Qwen3-VL's special tokens after the BPE vocabulary (as in Qwen's own
tokenizer), trained on the corpus plus stdlib docstrings; a ``Qwen3VLConfig`` whose token ids
match it; a small image processor (transformers' PIL one: torchvision does not load on the CPU
machines); then ``ColQwen3(config)`` (random init, random norm weights, colpali-engine's fixed
320-wide projection) and ``ColQwen3Processor``, both ``save_pretrained(DIR)``, reloaded with
their ``from_pretrained`` and checked weight for weight.

``Qwen3VLProcessor`` requires a video processor, so Qwen3-VL's is saved too (same patch grid);
ColQwen3 never processes videos (that alone would need torchvision).

Sizes: ``tiny`` (the parity tests' model), ``cpu`` (a small benchmark model a 2-core CPU serves
in well under a second per page) and ``bench`` (Qwen3-VL-2B's shapes, for GPU benchmarks). The
two benchmark sizes use Qwen's initializer range (0.02), zero the projection's bias (vLLM's
native ``ColQwen3Model`` serves a colpali-engine checkpoint only with ``dim`` given in its
config, and then without the bias: with a zero bias both compute the same vectors) and
``bench`` is saved in bfloat16. Their weights are random: ColPali has no data-dependent
decoding, so the work per page, and thus every timing, is that of a trained model of the same
shapes.
"""

from __future__ import annotations

from pathlib import Path

from vllm_factory.heads.colpali.image_processing import use_pil_image_processors

use_pil_image_processors()  # before transformers' Qwen2-VL / colpali-engine's modules load

import torch
from colpali_checkpoint import (
    check_same_ids,
    check_same_weights,
    corpus_texts,
    log_saved,
    save,
)
from colpali_encode import check_not_degenerate, load_class
from qwen3_vl_tiny import (
    BENCH,
    CPU,
    TINY,
    pil_image_processor,
    qwen3_vl_config,
    qwen_tokenizer,
    randomize_norms,
    video_processor,
)
from tiny_checkpoint import builder_arguments

HERE = Path(__file__).resolve().parent
MODEL_CLASS, PROCESSOR_CLASS = (
    "colpali_engine.models:ColQwen3",
    "colpali_engine.models:ColQwen3Processor",
)

# The kit's sizes; the benchmark ones with a zero projection bias (what vLLM's native
# ColQwen3Model computes).
SIZES: dict[str, dict] = {
    "tiny": TINY,
    "cpu": {**CPU, "zero_projection_bias": True},
    "bench": {**BENCH, "zero_projection_bias": True},
}


def main() -> None:
    args = builder_arguments(__doc__, SIZES, HERE / "corpus.json")
    size = SIZES[args.size]
    data, texts = corpus_texts(args.corpus)
    tok = qwen_tokenizer(texts, args.vocab_size, model_max_length=4096)

    model_cls, processor_cls = load_class(MODEL_CLASS), load_class(PROCESSOR_CLASS)
    config = qwen3_vl_config(tok, size["text"], size["vision"], size["mrope_section"],
                             size["initializer_range"])  # fmt: skip
    torch.manual_seed(args.seed)
    model = model_cls(config).eval()
    randomize_norms(model)
    if size.get("zero_projection_bias"):
        with torch.no_grad():
            model.custom_text_proj.bias.zero_()
    dtype = getattr(torch, size.get("save_dtype", "float32"))
    model.to(dtype)
    budget = size["vision"], size["min_tokens"], size["max_tokens"]
    processor = processor_cls(image_processor=pil_image_processor(*budget), tokenizer=tok,
                              video_processor=video_processor(*budget))  # fmt: skip
    save(args.out, model, processor)

    reloaded = model_cls.from_pretrained(args.out, dtype=dtype).eval()
    check_same_weights(model.state_dict(), reloaded.state_dict())
    processor2 = processor_cls.from_pretrained(args.out)
    check_same_ids(processor, processor2, [data["queries"][2]["text"]])
    with torch.inference_mode():
        vecs = reloaded(**processor2.process_texts([data["documents"][2]["text"]]))[0]
    log_saved(args, model, check_not_degenerate(vecs.float().numpy(), "document d02"))


if __name__ == "__main__":
    main()
