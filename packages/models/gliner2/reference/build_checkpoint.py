"""Build a small, seeded, offline GLiNER2 (span architecture) checkpoint on a random DeBERTa-v3.

Runs in the gliner2 reference venv (no hub access):

    python build_checkpoint.py --out DIR [--seed 0] [--size tiny|bench] [--report calib.json] \
        [--calibration-texts texts.json --calibration-schema JSON]

Steps: the DeBERTa-v3 tokenizer and random ``DebertaV2Model`` of the testing kit's
``deberta_checkpoint`` (the tokenizer trained on the GLiNER2 cases' texts, as given and
lower-cased, since gliner2 lower-cases every word before tokenising, plus stdlib docstrings),
saved to a temporary directory; then gliner2's own model on it:
``GLiNER2(ExtractorConfig(model_name=<dir>, max_width=8, counting_layer="count_lstm",
token_pooling="first"))``, which adds its special tokens ([SEP_STRUCT] [SEP_TEXT] [P] [C] [E]
[R] [L] [EXAMPLE] [OUTPUT] [DESCRIPTION]) and resizes the embeddings to the tokenizer (dropping
the backbone's spare rows); the random heads calibrated (below); ``save_pretrained(out)``; and
a check that ``GLiNER2.from_pretrained(out)`` gives the same results and scores on every case.

The GLiNER2 steps and the heads' calibration: ``gliner2_checkpoint`` in the testing kit's
scripts.
"""

from __future__ import annotations

from deberta_checkpoint import build_backbone, train_tokenizer
from gliner2_checkpoint import main

# head_dim = hidden / heads must be 32 or 64 (vLLM CPU attention). Few position buckets in the
# tiny model so that the longer prompts reach the log-bucketed distances. Initializer range 0.3
# (deberta_gliner's 0.1 gives nearly uniform attention, so the [E]/[C]/[R] marker tokens of one
# prompt come out nearly equal and the calibration must amplify tiny differences ~4x more).
SIZES: dict[str, dict] = {
    "tiny": {"hidden": 128, "heads": 4, "inter": 256, "layers": 2, "buckets": 16,
             "max_pos": 512, "max_width": 8, "model_max_length": 512, "init_range": 0.3},
    "bench": {"hidden": 768, "heads": 12, "inter": 3072, "layers": 12, "buckets": 256,
              "max_pos": 512, "max_width": 8, "model_max_length": 512, "init_range": 0.3},
}  # fmt: skip
BACKBONE_NAME = "random-deberta-v3"


if __name__ == "__main__":
    main(__doc__, SIZES, train_tokenizer, build_backbone, BACKBONE_NAME)
