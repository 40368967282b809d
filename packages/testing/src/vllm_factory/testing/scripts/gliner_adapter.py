"""A seeded PEFT LoRA adapter on a GLiNER checkpoint's encoder, and gliner's outputs with it
applied in process (runs in the gliner + peft venv)::

    python gliner_adapter.py --checkpoint DIR --corpus corpus.json --out ADAPTER_DIR [DIR ...] \
        [--out-scores scores.npz --entities entities.json [--bf16-out-scores bf16.npz]] \
        --seed 1 \
        [--rank 4] [--alpha 8] --targets query_proj value_proj ... [--whole-model]

Several ``--out`` folders: one adapter each, the k-th drawn with seed ``--seed`` + k, in one
process (gliner and PEFT imported once: the bench's eight adapters).

The adapter is PEFT's ``LoraConfig`` on gliner's encoder, the Hugging Face model at
``model.model.token_rep_layer.bert_layer.model``: the module gliner.serve's PolyLoRA wraps,
and the one gliner itself wraps with ``get_peft_model`` when an encoder folder holds an
``adapter_config.json``. Its ``lora_A`` and ``lora_B`` matrices are drawn from a seeded normal
(PEFT starts ``lora_B`` at zero, which would leave the outputs unchanged), and it is saved
with ``save_pretrained(out)``: ``adapter_config.json`` + ``adapter_model.safetensors``, names
``base_model.model.<encoder module>.lora_A.weight`` (DeBERTa:
``base_model.model.encoder.layer.N.attention.self.query_proj...``; ModernBERT:
``base_model.model.layers.N.attn.Wqkv...``). ``--targets``: the modules PEFT adapts (the last
parts of their names, the encoder's own: ``query_proj``, ``Wqkv``, ...). ``--whole-model``:
PEFT on gliner's whole torch model (``model.model``) instead, names
``base_model.model.token_rep_layer.bert_layer.model....`` (targets may then name head
modules too, e.g. ``prompt_rep_layer.0``).

The outputs are those of a fresh gliner model whose encoder is replaced by
``PeftModel.from_pretrained(encoder, out)`` (the saved adapter, as a server loads it), in the
parity suite's format (``gliner_encode.py``), when asked for: ``--out-scores`` the token ids, word counts and
span x label scores of every (label set, text); ``--entities`` ``GLiNER.inference``'s entity
lists per label set, decoding mode and threshold; ``--bf16-out-scores`` the score tensors again
from a fresh copy of that model cast to bf16 (gliner's own bf16 run with the adapter, the GPU
check's yardstick).

Checks: the adapter moves gliner's scores (a LoRA that changed nothing would make every parity
test of it vacuous), and the reloaded adapter gives the scores of the model it was made on.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch
from lora_weights import draw_lora_factors
from tiny_checkpoint import script_parser

PROBE_TEXT = "Ada Lovelace wrote the first program for Charles Babbage in London in 1843."
PROBE_LABELS = ["person", "location", "date"]


def probe(model) -> np.ndarray:
    from gliner_encode import scores_for

    return scores_for(model, PROBE_TEXT, PROBE_LABELS)[0]


def adapted_owner(model, whole: bool) -> tuple[object, str]:
    """The module that holds the adapted one, and its attribute name: gliner's encoder
    (``token_rep_layer.bert_layer.model``) or, ``whole``, gliner's torch model."""
    return (model, "model") if whole else (model.model.token_rep_layer.bert_layer, "model")


def make_adapter(checkpoint: Path, out: Path, seed: int, rank: int, alpha: float,
                 targets: list[str], whole: bool) -> tuple[dict, np.ndarray]:  # fmt: skip
    from gliner_encode import load
    from peft import LoraConfig, get_peft_model

    model = load(checkpoint, "float32")
    base = probe(model)
    owner, attribute = adapted_owner(model, whole)
    config = LoraConfig(r=rank, lora_alpha=alpha, lora_dropout=0.0, target_modules=targets)
    peft_model = get_peft_model(getattr(owner, attribute), config)
    setattr(owner, attribute, peft_model)
    adapted_layers = draw_lora_factors(peft_model, seed)
    assert adapted_layers, f"targets {targets} matched no module"
    adapted = probe(model.eval())
    change = float(np.abs(adapted - base).max())
    assert change > 1e-3, f"the adapter moves the probe's scores by only {change:.2e}"
    peft_model.save_pretrained(str(out))
    figures = {"seed": seed, "rank": rank, "alpha": alpha, "targets": targets, "whole": whole,
               "lora_layers": adapted_layers, "probe_max_change": change}  # fmt: skip
    return figures, adapted


def with_adapter(checkpoint: Path, adapter: Path, whole: bool):
    """A fresh gliner model, its encoder (``whole``: its torch model) wrapped by PEFT with the
    saved adapter."""
    from gliner_encode import load
    from peft import PeftModel

    model = load(checkpoint, "float32")
    owner, attribute = adapted_owner(model, whole)
    setattr(owner, attribute, PeftModel.from_pretrained(getattr(owner, attribute), str(adapter)))
    return model.eval()


def main() -> None:
    from gliner_encode import entity_lists, score_arrays

    ap = script_parser(__doc__, "corpus", outs=True)
    ap.add_argument("--out-scores", type=Path)
    ap.add_argument("--entities", type=Path)
    ap.add_argument("--bf16-out-scores", type=Path)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--rank", type=int, default=4)
    ap.add_argument("--alpha", type=float, default=8.0)
    ap.add_argument("--targets", nargs="+", required=True)
    ap.add_argument("--whole-model", action="store_true")
    args = ap.parse_args()
    if len(args.out) > 1 and (args.out_scores or args.entities or args.bf16_out_scores):
        ap.error("--out-scores, --entities and --bf16-out-scores go with one --out")
    for k, out in enumerate(args.out):
        torch.manual_seed(args.seed + k)
        figures, adapted = make_adapter(args.checkpoint, out, args.seed + k, args.rank,
                                        args.alpha, args.targets, args.whole_model)  # fmt: skip
        model = with_adapter(args.checkpoint, out, args.whole_model)
        reloaded = float(np.abs(probe(model) - adapted).max())
        assert reloaded < 1e-6, f"the reloaded adapter differs from the saved model: {reloaded}"
        print(json.dumps(figures))
    if args.out_scores is None or args.entities is None:
        return
    corpus = json.loads(args.corpus.read_text(encoding="utf-8"))
    np.savez(args.out_scores, **score_arrays(model, corpus))
    entities = entity_lists(model, corpus)
    entities["adapter"] = figures
    args.entities.write_text(json.dumps(entities, ensure_ascii=False), encoding="utf-8")
    if args.bf16_out_scores is not None:
        bf16 = with_adapter(args.checkpoint, args.out[-1], args.whole_model).to(torch.bfloat16)
        np.savez(args.bf16_out_scores, **score_arrays(bf16, corpus))


if __name__ == "__main__":
    main()
