"""Build a small, seeded, offline GLiNER2 (span architecture) checkpoint on a random ModernBERT.

Runs in the gliner2 reference venv (no hub access):

    python build_checkpoint.py --out DIR [--seed 0] [--size tiny|bench] [--report calib.json] \
        [--calibration-texts texts.json --calibration-schema JSON]

Steps: a cased BPE tokenizer on BERT pre-tokenisation (the testing kit's ``bert_bpe_tokenizer``,
as mmbert_gliner's checkpoint has) and a random ``ModernBertModel`` (transformers' own classes;
alternating global and sliding-window layers, as ModernBERT and mmBERT have); then the GLiNER2
steps of ``gliner2_checkpoint`` in the testing kit's scripts: gliner2's own model on that
backbone (``GLiNER2(ExtractorConfig(model_name=<dir>, ...))``: for a ModernBERT encoder
config, gliner2 2.1 builds its span model with ``AutoModel``'s ``ModernBertModel`` as the
encoder, the same heads as on DeBERTa), the heads calibrated, ``save_pretrained(out)``, reloaded
and compared.
"""

from __future__ import annotations

from gliner2_checkpoint import main
from tiny_checkpoint import bert_bpe_tokenizer, modernbert_backbone
from transformers import ModernBertModel, PreTrainedTokenizerFast

# head_dim = hidden / heads must be 32 or 64 (vLLM CPU attention). The prompts of the GLiNER2
# cases reach ~500 tokens: 512 positions, and a sliding window (32) much shorter than them, so
# that the local layers' window is exercised. Initializer range 0.3, as the DeBERTa GLiNER2
# checkpoint has (smaller ranges give nearly equal marker-token states).
SIZES: dict[str, dict] = {
    "tiny": {"hidden": 128, "heads": 4, "inter": 192, "layers": 2, "global_every": 2,
             "local": 32, "max_pos": 512, "max_width": 8, "model_max_length": 512,
             "init_range": 0.3},
    "bench": {"hidden": 768, "heads": 12, "inter": 1152, "layers": 22, "global_every": 3,
              "local": 128, "max_pos": 8192, "max_width": 8, "model_max_length": 8192,
              "init_range": 0.3},
}  # fmt: skip
BACKBONE_NAME = "random-modernbert"


def train_tokenizer(texts: list[str], vocab_size: int, max_length: int) -> PreTrainedTokenizerFast:
    """Cased BPE on BERT pre-tokenisation with [CLS] x [SEP] (reproducible)."""
    return bert_bpe_tokenizer(texts, vocab_size, max_length, lowercase=False)


def build_backbone(tok: PreTrainedTokenizerFast, s: dict, seed: int) -> ModernBertModel:
    return modernbert_backbone(tok, s, seed, initializer_range=s["init_range"])


if __name__ == "__main__":
    main(__doc__, SIZES, train_tokenizer, build_backbone, BACKBONE_NAME)
