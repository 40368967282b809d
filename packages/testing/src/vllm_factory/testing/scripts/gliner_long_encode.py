"""Reference for long texts read in windows (runs in the gliner venv; gliner has no long-text
API, so the windows and the merge are written here from the served rule, not imported).

    python gliner_long_encode.py --checkpoint DIR --cases cases.json --out ref-long.json \
        --scores ref-long.npz

Each case: ``text``, ``labels``, ``threshold``, ``overlap``, ``flat_ner``, ``multi_label`` and
optional ``input_spans`` (``[[start, end], ...]`` character spans). The text is split with
gliner's whitespace splitter into windows of the checkpoint's ``max_len`` words, window ``k``
starting at word ``k * (max_len - overlap)``, the last ending at the text's last word. gliner's
model scores each window's text alone (its raw sigmoid span x label scores, as
``predict_entities`` computes them). Candidates: every cell above the threshold whose span ends
inside its window, moved to whole-text word indices, the higher score kept where windows
overlap, restricted to ``input_spans``; gliner's own ``greedy_search`` selects among them (in
whole-text row-major order before its sort by score). Written: per case the windows and the
entities (``start``, ``end`` character offsets of the whole text, ``text``, ``label``,
``score``); in the ``.npz`` the whole text's scores (``scores_<case>``: per cell the highest
score of the windows that hold the span whole, 0 where none does).
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

import numpy as np
import torch

WORDS = re.compile(r"\w+(?:[-_]\w+)*|\S")  # gliner's whitespace splitter


def windows(num_words: int, max_len: int, overlap: int) -> list[tuple[int, int]]:
    if num_words <= max_len:
        return [(0, num_words)]
    out, first = [], 0
    while first + max_len < num_words:
        out.append((first, first + max_len))
        first += max_len - overlap
    return [*out, (first, num_words)]


@torch.no_grad()
def window_scores(model, text: str, labels: list[str]) -> np.ndarray:
    """gliner's sigmoid scores ``[words, max_width, labels]`` of ``text`` read alone."""
    prepared = model.prepare_batch([text], labels)
    batch = model.collate_batch(prepared["input_x"], prepared["entity_types"])
    logits = model.run_batch(batch).logits[0]
    return torch.sigmoid(logits).float().numpy()[: len(prepared["tokens"][0])]


def run_case(model, case: dict) -> tuple[dict, np.ndarray]:
    from gliner.decoding.decoder import Span

    text, labels, threshold = case["text"], case["labels"], case["threshold"]
    max_len = int(model.config.max_len)
    spans = [(m.start(), m.end()) for m in WORDS.finditer(text)]
    bounds = windows(len(spans), max_len, case["overlap"])
    best: dict[tuple[int, int, int], float] = {}
    merged = None
    for first, end in bounds:
        piece = text[spans[first][0] : spans[end - 1][1]]
        probs = window_scores(model, piece, labels)
        size = end - first
        assert probs.shape[0] == size, (probs.shape, size)
        if merged is None:
            merged = np.zeros((len(spans), probs.shape[1], probs.shape[2]), dtype=np.float32)
        inside = np.arange(size)[:, None] + np.arange(probs.shape[1])[None, :] < size
        rows = merged[first:end]
        np.maximum(rows, probs * inside[:, :, None], out=rows)
        for start, width, label in np.argwhere((probs > threshold) & inside[:, :, None]).tolist():
            value = float(probs[start, width, label])
            key = (first + start, first + start + width, label)
            best[key] = max(best.get(key, value), value)
    if case.get("input_spans") is not None:
        starts = {s: i for i, (s, _) in enumerate(spans)}
        ends = {e: i for i, (_, e) in enumerate(spans)}
        allowed = {(starts.get(s), ends.get(e)) for s, e in case["input_spans"]}
        best = {key: value for key, value in best.items() if key[:2] in allowed}
    ordered = [Span(s, e, labels[c], v) for (s, e, c), v in sorted(best.items())]
    kept = model.decoder.greedy_search(ordered, case["flat_ner"], case["multi_label"])
    entities = [
        {"start": spans[k.start][0], "end": spans[k.end][1],
         "text": text[spans[k.start][0] : spans[k.end][1]], "label": k.entity_type,
         "score": k.score}
        for k in kept
    ]  # fmt: skip
    return {"windows": bounds, "entities": entities}, merged


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--checkpoint", required=True, type=Path)
    ap.add_argument("--cases", required=True, type=Path)
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--scores", required=True, type=Path)
    args = ap.parse_args()
    from gliner import GLiNER

    torch.manual_seed(0)
    model = GLiNER.from_pretrained(str(args.checkpoint), local_files_only=True).eval()
    cases = json.loads(args.cases.read_text(encoding="utf-8"))
    results, arrays = {}, {}
    for name, case in cases.items():
        results[name], arrays[f"scores_{name}"] = run_case(model, case)
    args.out.write_text(json.dumps(results, ensure_ascii=False), encoding="utf-8")
    np.savez(args.scores, **arrays)


if __name__ == "__main__":
    main()
