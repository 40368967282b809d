"""CPU time of the GLiNER IOProcessor per request: what each API process of a served GLiNER
model spends in our code (request validation, word splitting, tokenizing, layouts; then span
decoding and the response), outside vLLM.

    python packages/heads/gliner/benchmarks/bench_io_processor.py \\
        --checkpoint .artifacts/deberta-gliner-reference-<hash>/checkpoint --out io.json

``--checkpoint``: any checkpoint in gliner's layout (the parity suites' reference checkpoints
are built under ``.artifacts/``); it is prepared into a temporary folder with a token limit of
``--token-limit`` (the tiny reference tokenizers say 160; trained DeBERTa GLiNERs 512), so a
text of ``--words`` words is tokenized whole, as on a served model. Texts are the bench's
(seeded sentences of corpus and docstring words), one per request with 5 labels. The engine's
output is replaced by seeded scores ``u ** k`` (u uniform) with ``k`` calibrated on the first
texts so that decoding at threshold 0.5 keeps ``--density`` entities per word (a trained model
finds about one per 5 - 15 words); the JSON reports ``k``, the density reached and the
candidates above the threshold per text, with the best of ``--rounds`` rounds per phase.
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import shutil
import tempfile
import time
import types
import uuid
from pathlib import Path

import torch
from vllm_factory.heads.gliner.io_processor import GLiNERIOProcessor
from vllm_factory.heads.gliner.prep import prepare
from vllm_factory.testing.bench import word_pool, word_stream
from vllm_factory.testing.gliner.bench import LABELS, THRESHOLD
from vllm_factory.testing.gliner.references import CORPUS


class Output:  # what post_process reads of a PoolingRequestOutput
    def __init__(self, scores: torch.Tensor) -> None:
        self.outputs = types.SimpleNamespace(data=scores)


def served_copy(checkpoint: Path, out: Path, token_limit: int) -> Path:
    """``checkpoint`` prepared for serving, its tokenizer's limit set to ``token_limit``."""
    prepare(checkpoint, out, architecture="GLiNERBench", io_processor="gliner_bench")
    config_file = out / "tokenizer_config.json"
    config = json.loads(config_file.read_text())
    config["model_max_length"] = token_limit
    config_file.write_text(json.dumps(config))
    return out


class Bench:
    def __init__(self, served: Path, max_model_len: int, seed: int) -> None:
        model = types.SimpleNamespace(model=str(served), revision=None, max_model_len=max_model_len)
        self.processor = GLiNERIOProcessor(types.SimpleNamespace(model_config=model), None)
        self.max_width = self.processor.settings.max_width
        self.seed = seed

    def body(self, text: str) -> dict:
        return {"text": text, "labels": LABELS, "threshold": THRESHOLD, "max_len": 384}

    def pre(self, text: str) -> tuple[str, int]:
        """Validation and prompts of one request (what vLLM's pre-processing calls)."""
        request_id = uuid.uuid4().hex
        request = self.processor.parse_data(self.body(text))
        self.processor.pre_process(request, request_id)
        self.processor.merge_pooling_params(None)
        return request_id, len(self.processor.text_words(request, 0))

    def scores(self, words: int, exponent: float, index: int) -> torch.Tensor:
        generator = torch.Generator().manual_seed(self.seed + index)
        return torch.rand(words, self.max_width, len(LABELS), generator=generator) ** exponent

    def post(self, request_id: str, scores: torch.Tensor) -> list:
        return self.processor.post_process([Output(scores)], request_id)

    def density(self, texts: list[str], exponent: float) -> tuple[float, float]:
        """Entities and candidates (cells above the threshold) per word."""
        entities = candidates = words = 0
        for index, text in enumerate(texts):
            request_id, count = self.pre(text)
            scores = self.scores(count, exponent, index)
            entities += len(self.post(request_id, scores)[0])
            candidates += int((scores > THRESHOLD).sum())
            words += count
        return entities / words, candidates / words

    def calibrate(self, texts: list[str], target: float) -> float:
        """The exponent whose scores give ``target`` entities per word (bisection on log k)."""
        low, high = 1.0, 1e5  # density falls as the exponent grows
        for _ in range(30):
            middle = (low * high) ** 0.5
            if self.density(texts, middle)[0] > target:
                low = middle
            else:
                high = middle
        return (low * high) ** 0.5


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoint", type=Path, required=True, help="gliner-layout folder")
    parser.add_argument("--words", type=int, default=380, help="words per text")
    parser.add_argument("--density", type=float, default=0.1, help="entities per word")
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--token-limit", type=int, default=512)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()

    rng = random.Random(args.seed)
    pool = word_pool(json.loads(CORPUS.read_text(encoding="utf-8"))["texts"])
    texts = [" ".join(word_stream(pool, args.words, rng)) for _ in range(args.requests)]
    folder = Path(tempfile.mkdtemp(prefix="gliner-io-bench-"))
    try:
        served = served_copy(args.checkpoint, folder / "served", args.token_limit)
        bench = Bench(served, args.token_limit, args.seed)
        exponent = bench.calibrate(texts[:20], args.density)
        density, candidates = bench.density(texts[:50], exponent)
        for text in texts[:50]:  # warm the word-token cache as a running server has it
            bench.pre(text)
        phases: dict[str, float] = {"pre_process": float("inf"), "post_process": float("inf")}
        words = []
        for _ in range(args.rounds):
            started = time.process_time()
            pending = [bench.pre(text) for text in texts]
            middle = time.process_time()
            outputs = [bench.scores(n, exponent, i) for i, (_, n) in enumerate(pending)]
            resumed = time.process_time()
            for (request_id, _), scores in zip(pending, outputs):
                bench.post(request_id, scores)
            ended = time.process_time()
            phases["pre_process"] = min(phases["pre_process"], (middle - started) / len(texts))
            phases["post_process"] = min(phases["post_process"], (ended - resumed) / len(texts))
            words = [n for _, n in pending]
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    checkpoint = "/".join(args.checkpoint.parts[-2:])  # no machine path in the results
    result = {
        "machine": {"processor": platform.processor() or platform.machine(),
                    "python": platform.python_version(), "torch": torch.__version__},
        "settings": {"words_per_text": args.words, "labels": len(LABELS), "threshold": THRESHOLD,
                     "requests": args.requests, "rounds": args.rounds,
                     "token_limit": args.token_limit, "checkpoint": checkpoint},
        "calibration": {"exponent": round(exponent, 3), "entities_per_word": round(density, 4),
                        "candidates_per_word": round(candidates, 3)},
        "words_per_request": sum(words) / len(words),
        "us_per_request": {name: round(1e6 * value, 1) for name, value in phases.items()},
    }  # fmt: skip
    result["us_per_request"]["total"] = round(sum(result["us_per_request"].values()), 1)
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
