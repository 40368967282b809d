"""A seeded LoRA adapter for a GLiNER2 checkpoint, made with gliner2's own API (runs in the
gliner2 venv)::

    python gliner2_adapter.py --checkpoint DIR --out ADAPTER_DIR [DIR ...] --seed 1 \
        [--rank 4] [--alpha 8] [--targets encoder ...] [--legacy-out LEGACY_DIR]

Several ``--out`` folders: one adapter each, the k-th drawn with seed ``--seed`` + k, in one
process (gliner2 imported once: the bench's eight adapters).

``GLiNER2.from_pretrained(checkpoint).apply_lora(r, alpha, targets=...)`` (gliner2 2.1's LoRA
entry point: PEFT's ``LoraConfig`` on the modules its target groups resolve to; ``encoder``:
every encoder ``Linear`` whose name holds query / key / value / dense), then every ``lora_A``
and ``lora_B`` matrix drawn from a seeded normal (PEFT starts ``lora_B`` at zero, which would
leave the outputs unchanged), then ``save_pretrained(out)``: PEFT's layout,
``adapter_config.json`` + ``adapter_model.safetensors`` (names
``base_model.model.encoder.encoder.layer.N....lora_A.weight``), which ``load_adapter`` reads.

``--legacy-out``: the same adapter also in gliner2's legacy layout, through the library's
``gliner2.training.lora.save_lora_adapter`` (``adapter_weights.safetensors`` with
``<module>.lora_A`` / ``.lora_B``, ``adapter_config.json`` without ``peft_type``), which
``load_adapter`` also reads.

Check before saving: the adapter moves the library's outputs (a LoRA that changed nothing
would make every parity test of it vacuous); after saving, ``load_adapter(out)`` on a fresh
model gives the same outputs as the model it was made on (each layout).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch
from lora_weights import draw_lora_factors

# The case used for the checks: a text with an entity and a classification task, through the
# library's own call.
PROBE = {
    "text": "Ada Lovelace wrote the first program for Charles Babbage in London in 1843.",
    "request": {"schema": {"entities": ["person", "location", "date"],
                           "classifications": [{"task": "topic",
                                                "labels": ["science", "sport", "music"]}]}},
}  # fmt: skip


def probe_scores(model) -> torch.Tensor:
    """What the probe's call computes: the text's word embeddings (the encoder's output), the
    classification probabilities and the entity span scores where a count was predicted."""
    from gliner2_encode import run_case

    _, seen = run_case(model, PROBE)
    parts = [seen["token_embs"].flatten(), *(p.flatten() for p in seen["cls"].values())]
    parts += [torch.sigmoid(raw).flatten() for raw, _ in seen["span"].values() if raw is not None]
    return torch.cat([p.float() for p in parts])


def moved(a: torch.Tensor, b: torch.Tensor) -> float:
    """How far ``b`` is from ``a`` (infinite where the predicted counts changed the shapes)."""
    return float((a - b).abs().max()) if a.shape == b.shape else float("inf")


def make_adapter(checkpoint: Path, out: Path, seed: int, rank: int, alpha: float,
                 targets: list[str], legacy_out: Path | None = None) -> dict:  # fmt: skip
    from gliner2 import GLiNER2

    model = GLiNER2.from_pretrained(str(checkpoint)).eval()
    model.sync_collapsed_decode = False
    base = probe_scores(model)
    peft_model = model.apply_lora(r=rank, alpha=alpha, targets=targets)
    layers = draw_lora_factors(peft_model, seed)
    assert layers, f"targets {targets} matched no module"
    adapted = probe_scores(model)  # PEFT injected the layers into the model itself
    change = moved(base, adapted)
    assert change > 1e-3, f"the adapter moves the probe's outputs by only {change:.2e}"
    peft_model.save_pretrained(str(out))
    saved = [out]
    if legacy_out is not None:
        from gliner2.training.lora import save_lora_adapter

        save_lora_adapter(peft_model, legacy_out)
        saved.append(legacy_out)

    for folder in saved:
        fresh = GLiNER2.from_pretrained(str(checkpoint)).eval()
        fresh.sync_collapsed_decode = False
        fresh.load_adapter(str(folder))
        reloaded = moved(adapted, probe_scores(fresh))
        assert reloaded < 1e-6, f"load_adapter({folder}) differs from the saved model: {reloaded}"
    return {"seed": seed, "rank": rank, "alpha": alpha, "targets": targets,
            "lora_layers": layers, "probe_max_change": change}  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--checkpoint", required=True, type=Path)
    ap.add_argument("--out", required=True, type=Path, nargs="+")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--rank", type=int, default=4)
    ap.add_argument("--alpha", type=float, default=8.0)
    ap.add_argument("--targets", nargs="+", default=["encoder"])
    ap.add_argument("--legacy-out", type=Path)
    args = ap.parse_args()
    if len(args.out) > 1 and args.legacy_out:
        ap.error("--legacy-out goes with one --out")
    for k, out in enumerate(args.out):
        torch.manual_seed(args.seed + k)
        figures = make_adapter(args.checkpoint, out, args.seed + k, args.rank, args.alpha,
                               args.targets, args.legacy_out)  # fmt: skip
        print(json.dumps(figures))


if __name__ == "__main__":
    main()
