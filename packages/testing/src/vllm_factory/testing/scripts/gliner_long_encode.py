"""Reference for long texts read in windows (runs in the gliner venv; gliner has no long-text
API, so the windows and the merge are written here from the served rule, not imported).

    python gliner_long_encode.py --checkpoint DIR --cases cases.json --out ref-long.json \
        --scores ref-long.npz

Each case: ``text``, ``labels``, ``threshold`` (or ``candidate_share``: the threshold is the score
above which that share of the whole text's (span, label) cells lies), ``overlap``, ``flat_ner``,
``multi_label`` and optional ``input_spans`` (``[[start, end], ...]`` character spans). The text
is split with gliner's whitespace splitter into words. Token room: gliner's tokenizer's limit less
what gliner puts in a prompt besides the text (special tokens, and for a uni-encoder the label
prompt gliner's processor builds), counted by tokenizing gliner's own prompt for the whole text
without truncation and attributing each token to its word. A text of at most ``max_len`` words
whose tokens fit the room is one window; else each window runs from its first word to the last
word such that it holds at most ``max_len`` words and their tokens fit the room (one word at
least), and the next starts ``overlap`` words before its end, or one word after its start when
that is not later. gliner's model scores each window's text alone (its raw sigmoid span x label
scores, as ``predict_entities`` computes them). Candidates: every cell above the threshold whose
span ends inside its window, moved to whole-text word indices, the higher score kept where windows
overlap, restricted to ``input_spans``; gliner's own ``greedy_search`` selects among them (in
whole-text row-major order before its sort by score). Written: per case the windows, the
threshold, the entities (``start``, ``end`` character offsets of the whole text, ``text``,
``label``, ``score``), ``unread``: the words no window gives a token in gliner's own
``tokenize_inputs`` (0 expected), and ``unread_by_words``: the same for windows of ``max_len``
words alone (the rule before token room, to show what a case tests); in the ``.npz`` the whole
text's scores (``scores_<case>``: per cell the highest score of the windows that hold the span
whole, 0 where none does); with ``--bf16-scores``, gliner's bf16 scores of the same windows.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import torch
from tiny_checkpoint import script_parser

WORDS = re.compile(r"\w+(?:[-_]\w+)*|\S")  # gliner's whitespace splitter


def windows(num_words: int, max_len: int, overlap: int) -> list[tuple[int, int]]:
    """Windows of ``max_len`` words alone (no token room)."""
    if num_words <= max_len:
        return [(0, num_words)]
    out, first = [], 0
    while first + max_len < num_words:
        out.append((first, first + max_len))
        first += max_len - overlap
    return [*out, (first, num_words)]


def token_windows(
    tokens: list[int], room: int, max_len: int, overlap: int
) -> list[tuple[int, int]]:
    """Windows of at most ``max_len`` words whose ``tokens`` (per word) fit ``room``."""
    if len(tokens) <= max_len and sum(tokens) <= room:
        return [(0, len(tokens))]
    out, first = [], 0
    while True:
        last, held = first, 0
        while last < len(tokens) and last - first < max_len and held + tokens[last] <= room:
            held += tokens[last]
            last += 1
        last = max(last, first + 1)
        out.append((first, last))
        if last >= len(tokens):
            return out
        first = max(last - overlap, first + 1)


def is_bi_encoder(model) -> bool:
    return getattr(model.config, "labels_encoder", None) is not None


def gliner_prompt(model, words: list[str], labels: list[str]) -> list[str]:
    """The word list gliner's processor tokenizes for ``words`` (and ``labels``)."""
    if is_bi_encoder(model):
        return list(words)
    texts, _ = model.data_processor.prepare_inputs([words], [labels])
    return list(texts[0])


def tokens_and_room(model, words: list[str], labels: list[str]) -> tuple[list[int], int]:
    """Each text word's token count in gliner's prompt, and the tokens the prompt leaves to
    the text (tokenizer limit less the special tokens and label prompt)."""
    tokenizer = model.data_processor.transformer_tokenizer
    prompt = gliner_prompt(model, words, labels)
    skip = len(prompt) - len(words)
    encoded = tokenizer(prompt, is_split_into_words=True, truncation=False)
    counts = [0] * len(prompt)
    for word in encoded.word_ids():
        if word is not None:
            counts[word] += 1
    text_tokens = counts[skip:]
    room = int(tokenizer.model_max_length) - (len(encoded["input_ids"]) - sum(text_tokens))
    return text_tokens, room


def unread_words(model, words: list[str], labels: list[str], bounds) -> int:
    """Words that no window gives a token in gliner's own ``tokenize_inputs``."""
    read = set()
    for first, end in bounds:
        piece = words[first:end]
        if is_bi_encoder(model):
            batch = model.data_processor.tokenize_inputs([piece])
        else:
            batch = model.data_processor.tokenize_inputs([piece], [labels])
        marked = batch["words_mask"][0]
        read |= {first + int(k) - 1 for k in marked.tolist() if k > 0}
    return len(words) - len(read & set(range(len(words))))


@torch.no_grad()
def window_scores(model, text: str, labels: list[str]) -> np.ndarray:
    """gliner's sigmoid scores ``[words, max_width, labels]`` of ``text`` read alone."""
    prepared = model.prepare_batch([text], labels)
    batch = model.collate_batch(prepared["input_x"], prepared["entity_types"])
    logits = model.run_batch(batch).logits[0]
    return torch.sigmoid(logits).float().numpy()[: len(prepared["tokens"][0])]


def split(text: str) -> tuple[list[tuple[int, int]], list[str]]:
    """The words of ``text``: their character spans and strings."""
    spans = [(m.start(), m.end()) for m in WORDS.finditer(text)]
    return spans, [text[s:e] for s, e in spans]


def score_case(model, case: dict) -> tuple[list[tuple[int, int]], list[np.ndarray], np.ndarray]:
    """The case's windows, each window's scores, and the whole text's merged scores."""
    text, labels = case["text"], case["labels"]
    spans, words = split(text)
    tokens, room = tokens_and_room(model, words, labels)
    bounds = token_windows(tokens, room, int(model.config.max_len), case["overlap"])
    scored, merged = [], None
    for first, end in bounds:
        probs = window_scores(model, text[spans[first][0] : spans[end - 1][1]], labels)
        size = end - first
        assert probs.shape[0] == size, (probs.shape, size)
        if merged is None:
            merged = np.zeros((len(spans), probs.shape[1], probs.shape[2]), dtype=np.float32)
        inside = np.arange(size)[:, None] + np.arange(probs.shape[1])[None, :] < size
        probs = probs * inside[:, :, None]
        rows = merged[first:end]
        np.maximum(rows, probs, out=rows)
        scored.append(probs)
    return bounds, scored, merged


def case_threshold(case: dict, merged: np.ndarray) -> float:
    """The case's threshold, or for a case with ``candidate_share`` the score above which that
    share of the whole text's (span, label) cells lies."""
    if case.get("candidate_share") is None:
        return float(case["threshold"])
    words = merged.shape[0]
    inside = np.arange(words)[:, None] + np.arange(merged.shape[1])[None, :] < words
    cells = merged[inside].ravel()
    return float(np.quantile(cells, 1.0 - case["candidate_share"]))


def decode_case(model, case: dict, bounds, scored, threshold: float) -> dict:
    from gliner.decoding.decoder import Span

    text, labels = case["text"], case["labels"]
    spans, words = split(text)
    best: dict[tuple[int, int, int], float] = {}
    for (first, _), probs in zip(bounds, scored):
        for start, width, label in np.argwhere(probs > threshold).tolist():
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
    max_len = int(model.config.max_len)
    unread = unread_words(model, words, labels, bounds)
    before = unread_words(model, words, labels, windows(len(words), max_len, case["overlap"]))
    return {"windows": bounds, "threshold": threshold, "entities": entities, "unread": unread,
            "unread_by_words": before}  # fmt: skip


def main() -> None:
    ap = script_parser(__doc__, "cases")
    ap.add_argument("--scores", required=True, type=Path)
    ap.add_argument("--bf16-scores", type=Path, help="also gliner's bf16 run of every case")
    args = ap.parse_args()
    from gliner import GLiNER

    torch.manual_seed(0)
    model = GLiNER.from_pretrained(str(args.checkpoint), local_files_only=True).eval()
    cases = json.loads(args.cases.read_text(encoding="utf-8"))
    results, arrays = {}, {}
    for name, case in cases.items():
        bounds, scored, merged = score_case(model, case)
        threshold = case_threshold(case, merged)
        results[name] = decode_case(model, case, bounds, scored, threshold)
        arrays[f"scores_{name}"] = merged
    args.out.write_text(json.dumps(results, ensure_ascii=False), encoding="utf-8")
    np.savez(args.scores, **arrays)
    if args.bf16_scores is not None:  # what bf16 costs gliner itself on the same windows
        model = model.to(torch.bfloat16)
        bf16 = {f"scores_{name}": score_case(model, case)[2] for name, case in cases.items()}
        np.savez(args.bf16_scores, **bf16)


if __name__ == "__main__":
    main()
