"""Build a small, seeded, offline Nemotron ColEmbed checkpoint in the layout of NVIDIA's
(``nvidia/nemotron-colembed-vl-*-v2``), with transformers' own Qwen3-VL classes.

Runs in the ColPali reference venv (no hub access needed):

    python build_checkpoint.py --out DIR [--seed 0] [--size tiny|cpu|bench] [--corpus corpus.json]

Steps: a byte-level BPE tokenizer with Qwen3-VL's special tokens and chat format, trained on
the corpus plus stdlib docstrings (the kit's ``qwen3_vl_tiny``); a tiny ``Qwen3VLConfig`` whose
token ids match it; transformers' ``Qwen3VLForConditionalGeneration`` with random weights (norm
weights random too, the final norm's included: it must visibly not be applied), saved with
``save_pretrained`` (``model.visual.*``, ``model.language_model.*``, ``lm_head.weight``), and the
processor (image processor + tokenizer + chat template, no video processor, and the remote
processor's settings). Then the two JSON files are given what NVIDIA's carry: ``config.json``
``model_type`` ``qwen3_vl_nemotron_embed``, architecture ``Qwen3VLNemotronEmbedModel``,
``pooling`` ``colbert`` and an ``auto_map`` to remote code (not shipped: nothing here may need
it); ``processor_config.json`` names ``Qwen3VLNemotronEmbedProcessor`` with its ``auto_map``.

Sizes: the kit's Qwen3-VL ``tiny`` (the parity tests' model), ``cpu`` and ``bench`` (benchmark
models; ``bench`` has Qwen3-VL-2B's shapes and is saved in bfloat16). The tiny checkpoint's
``q_max_length`` is 64, so that the corpus' longest query is cut as the remote processor cuts
it; ``p_max_length`` 1024; the benchmark sizes keep the remote processor's 512 and 4096. Reloaded with :mod:`nemotron_hf` and checked:
the same weights, the same token ids, vectors that are not degenerate, attention that is
bidirectional (appending a token changes the first token's vector) and a final norm that is not
applied (the reference differs from transformers' own post-norm output).
"""

from __future__ import annotations

import json
from pathlib import Path

from vllm_factory.heads.colpali.image_processing import use_pil_image_processors

use_pil_image_processors()  # before transformers' Qwen2-VL modules load

import torch
import torch.nn.functional as F
from colpali_checkpoint import (
    check_same_ids,
    check_same_weights,
    corpus_texts,
    log_saved,
    save,
)
from colpali_encode import check_not_degenerate
from nemotron_hf import (
    ARCHITECTURE,
    MODEL_TYPE,
    PROCESSOR_CLASS,
    NemotronColEmbedHF,
    NemotronColEmbedProcessorHF,
)
from qwen3_vl_tiny import (
    BENCH,
    CHAT_TEMPLATE,
    CPU,
    TINY,
    pil_image_processor,
    qwen3_vl_config,
    qwen_tokenizer,
    randomize_norms,
)
from tiny_checkpoint import builder_arguments
from transformers import Qwen3VLForConditionalGeneration

HERE = Path(__file__).resolve().parent
# Where NVIDIA's auto_map points (hub remote code, never loaded here).
REMOTE_MODULE = "modeling_nemotron_colembed"

# The kit's Qwen3-VL sizes, with the remote processor's query / passage lengths (the
# benchmark sizes: the remote processor's defaults).
SIZES: dict[str, dict] = {
    "tiny": {**TINY, "processor": {"q_max_length": 64, "p_max_length": 1024}},
    "cpu": {**CPU, "processor": {}},
    "bench": {**BENCH, "processor": {}},
}


def nemotron_json(out: Path) -> None:
    """Give config.json, processor_config.json and tokenizer_config.json the fields NVIDIA's
    checkpoint carries."""
    path = out / "config.json"
    config = json.loads(path.read_text(encoding="utf-8"))
    config.update({
        "architectures": [ARCHITECTURE], "model_type": MODEL_TYPE, "pooling": "colbert",
        "auto_map": {"AutoConfig": f"{REMOTE_MODULE}.Qwen3VLNemotronEmbedConfig",
                     "AutoModel": f"{REMOTE_MODULE}.{ARCHITECTURE}"},
    })  # fmt: skip
    path.write_text(json.dumps(config, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    path = out / "processor_config.json"
    processor = json.loads(path.read_text(encoding="utf-8"))
    processor.update({"processor_class": PROCESSOR_CLASS,
                      "auto_map": {"AutoProcessor": f"processing.{PROCESSOR_CLASS}"}})  # fmt: skip
    path.write_text(json.dumps(processor, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    path = out / "tokenizer_config.json"
    tokenizer = json.loads(path.read_text(encoding="utf-8"))
    tokenizer["processor_class"] = PROCESSOR_CLASS
    path.write_text(json.dumps(tokenizer, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def first_token_moves(model: NemotronColEmbedHF, batch: dict) -> float:
    """How far the first token's vector moves when one token is appended (0 if causal)."""
    ids, mask = batch["input_ids"], batch["attention_mask"]
    longer = torch.cat([ids, ids[:, -1:]], dim=1)
    with torch.inference_mode():
        a = model(input_ids=ids, attention_mask=mask)[0, 0]
        b = model(input_ids=longer, attention_mask=torch.ones_like(longer))[0, 0]
    return float((a - b).abs().max())


def main() -> None:
    args = builder_arguments(__doc__, SIZES, HERE / "corpus.json")
    size = SIZES[args.size]
    data, texts = corpus_texts(args.corpus, extra=["Query: query: ", "passage: "])
    tok = qwen_tokenizer(texts, args.vocab_size, chat_template=CHAT_TEMPLATE)

    config = qwen3_vl_config(tok, size["text"], size["vision"], size["mrope_section"],
                             size["initializer_range"])  # fmt: skip
    torch.manual_seed(args.seed)
    model = Qwen3VLForConditionalGeneration(config).eval()
    randomize_norms(model)
    dtype = getattr(torch, size.get("save_dtype", "float32"))
    model.to(dtype)
    processor = NemotronColEmbedProcessorHF(
        image_processor=pil_image_processor(size["vision"], size["min_tokens"],
                                            size["max_tokens"]),
        tokenizer=tok, **size["processor"],
    )  # fmt: skip
    save(args.out, model, processor)
    nemotron_json(args.out)

    reloaded = NemotronColEmbedHF.from_pretrained(args.out, dtype=dtype)
    ours = model.state_dict()
    ours = {k: v for k, v in ours.items() if k != "model.language_model.norm.weight"}
    check_same_weights(ours, reloaded.model.state_dict())
    processor2 = NemotronColEmbedProcessorHF.from_pretrained(args.out)
    check_same_ids(processor, processor2, [data["queries"][i]["text"] for i in (2, 14)])
    batch = processor2.process_texts([data["documents"][2]["text"]])
    with torch.inference_mode():
        vecs = reloaded(**batch)[0]
        # What applying the checkpoint's final norm would give instead.
        pre_norm = reloaded.model.model(**batch).last_hidden_state[0]
        normed = F.normalize(model.model.language_model.norm(pre_norm), dim=-1)
    mean_cos = check_not_degenerate(vecs.float().numpy(), "document d02")
    vecs, normed = vecs.float(), normed.float()
    moved = first_token_moves(reloaded, batch)
    assert moved > 1e-3, f"attention looks causal: the first token moved by {moved:.2e}"
    gap = float((vecs - normed).abs().max())
    assert gap > 1e-3, f"applying the final norm changes nothing ({gap:.1e}): it tests nothing"
    log_saved(args, model, mean_cos, f"first token moved by {moved:.3f} when a token is appended")


if __name__ == "__main__":
    main()
