"""Host CPU time of GLiNER2 serving per request, stage by stage, outside vLLM: what our code
costs in vLLM's API process (request validation, schema plan and prompt; then decoding and
the response) and in its engine core (the head's Python and torch dispatch around a step).

    python -m vllm_factory.testing.gliner2.host_profile \\
        --checkpoint .artifacts/gliner2-reference-<hash>/checkpoint --out profile.json

``--checkpoint``: a GLiNER2 directory in the library's layout (a package's tiny reference
checkpoint, built under ``.artifacts/`` by its parity suite, keeps the head's own compute
small). Requests are the bench's: one text per request with the bench's mixed schema
(:data:`~vllm_factory.testing.gliner2.bench.SCHEMA`), texts of ``--tokens`` text tokens drawn
as the bench draws its corpus. Stages, each timed with ``time.process_time`` over all requests
(best of ``--rounds``), in microseconds per request:

- ``parse``: ``parse_data`` (the request model's validation);
- ``pre_process``: ``pre_process`` + ``merge_pooling_params`` (plan, words, tokens, layouts);
- ``head``: the head's ``forward`` on steps of ``--batch`` prompts, hidden states random
  (the encoder is not run) and every span task's predicted count forced to ``--instances``
  (a bias on the count head's output), divided by the prompts; on a CPU this includes the
  head's own arithmetic (on a GPU only its Python and kernel launches stay on the host);
- ``post_process``: ``post_process`` on the head's output vector of each prompt with its span
  scores replaced by seeded ``u ** k`` (``u`` uniform), ``k`` calibrated on the first texts
  so that decoding at the threshold keeps ``--density`` entities per word.

``head_ops_per_step``: the torch operations one head step dispatches that do work (views and
allocations left out), a step of ``--batch`` prompts: on a GPU each is a kernel launch or a
copy, issued from the engine core's one thread.

``--cprofile FILE`` also writes the top functions of one more round of each process's stages.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import platform
import pstats
import time
import types
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from vllm_factory.core.pooler import PoolerRequest
from vllm_factory.models.gliner2 import ARCHITECTURE
from vllm_factory.models.gliner2.head import GLiNER2Head
from vllm_factory.models.gliner2.io_processor import GLiNER2IOProcessor
from vllm_factory.models.gliner2.model import ENCODER_PREFIX
from vllm_factory.models.gliner2.prompts import KIND_CLASSES, LAYOUT_KEY, PromptLayout
from vllm_factory.testing.bench import build_corpus, word_pool
from vllm_factory.testing.gliner2.bench import SCHEMA, THRESHOLD, _text_tokens
from vllm_factory.testing.gliner2.references import CASES

API_STAGES = ("parse", "pre_process", "post_process")
ENGINE_STAGES = ("head",)


class Output:  # what post_process reads of a PoolingRequestOutput
    def __init__(self, data: torch.Tensor) -> None:
        self.outputs = types.SimpleNamespace(data=data)


def bench_texts(checkpoint: Path, tokens: int, count: int, seed: int) -> list[str]:
    """``count`` texts of at most ``tokens`` text tokens, drawn as the bench draws its corpus."""
    cases = json.loads(CASES.read_text(encoding="utf-8"))
    pool = word_pool([case["text"] for case in cases])
    corpus = build_corpus({str(tokens): 1.0}, count, seed, pool, _text_tokens(checkpoint))
    return corpus.texts


def head_of(checkpoint: Path, instances: int) -> GLiNER2Head:
    """The checkpoint's head (float32), its count head biased to predict ``instances``."""
    from safetensors.torch import load_file

    config = json.loads((checkpoint / "config.json").read_text())
    encoder = json.loads((checkpoint / "encoder_config" / "config.json").read_text())
    head = GLiNER2Head(encoder["hidden_size"], config["max_width"])
    weights = load_file(str(checkpoint / "model.safetensors"))
    head.load_weights((k, v) for k, v in weights.items() if not k.startswith(ENCODER_PREFIX))
    with torch.no_grad():
        head.count_pred[-1].bias[instances] += 1e4
    return head.eval()


class Profile:
    def __init__(self, checkpoint: Path, max_model_len: int, args: argparse.Namespace) -> None:
        model = types.SimpleNamespace(
            model=str(checkpoint), revision=None, max_model_len=max_model_len,
            hf_config=types.SimpleNamespace(architectures=[ARCHITECTURE]),
        )  # fmt: skip
        self.io = GLiNER2IOProcessor(types.SimpleNamespace(model_config=model), None)
        self.head = head_of(checkpoint, args.instances)
        self.width = self.head.classifier[0].in_features
        self.args = args

    @staticmethod
    def body(text: str) -> dict:
        return {"text": text, "schema": SCHEMA, "threshold": THRESHOLD}

    def parse(self, text: str) -> Any:
        return self.io.parse_data(self.body(text))

    def pre(self, request: Any) -> tuple[str, list[dict], Any]:
        request_id = uuid.uuid4().hex
        prompts = self.io.pre_process(request, request_id)
        params = self.io.merge_pooling_params(None)
        return request_id, prompts, params

    def head_inputs(self, pending: Sequence[tuple[str, list[dict], Any]]) -> list:
        """(hidden states, pooler request) per prompt: random states, the prompt's tokens and
        the extra_kwargs vLLM hands the engine."""
        generator = torch.Generator().manual_seed(self.args.seed)
        out = []
        for _, prompts, params in pending:
            for prompt in prompts:
                ids = torch.tensor(prompt["prompt_token_ids"], dtype=torch.int64)
                hidden = torch.randn(len(ids), self.width, generator=generator)
                out.append((hidden, PoolerRequest(token_ids=ids, extra=params.extra_kwargs)))
        return out

    def run_head(self, inputs: list) -> list[torch.Tensor]:
        outputs: list[torch.Tensor] = []
        with torch.inference_mode():
            for at in range(0, len(inputs), self.args.batch):
                step = inputs[at : at + self.args.batch]
                outputs += self.head([h for h, _ in step], [r for _, r in step])
        return outputs

    def scored(self, vector: torch.Tensor, layout: PromptLayout, exponent: float,
               index: int) -> torch.Tensor:  # fmt: skip
        """``vector`` with its span scores replaced by seeded ``u ** exponent`` (0 where the
        head gives 0: spans past the text)."""
        out = vector.clone()
        n_tasks = len(layout.tasks)
        classes = sum(len(m) - 1 for kind, m in layout.tasks if kind == KIND_CLASSES)
        span = out[n_tasks : len(out) - classes]
        generator = torch.Generator().manual_seed(self.args.seed + index)
        fresh = torch.rand(span.shape, generator=generator) ** exponent
        span.copy_(torch.where(span > 0, fresh, span))
        return out

    def post(self, request_id: str, outputs: list[torch.Tensor]) -> Any:
        return self.io.post_process([Output(o) for o in outputs], request_id)

    def entities_per_word(self, texts: list[str], exponent: float) -> float:
        found = words = 0
        for index, text in enumerate(texts):
            request_id, prompts, params = self.pre(self.parse(text))
            raw = self.run_head(self.head_inputs([(request_id, prompts, params)]))
            layout = self.layouts(params)[0]
            result = self.post(request_id, [self.scored(raw[0], layout, exponent, index)])
            found += sum(len(v) for v in result.get("entities", {}).values())
            words += len(text.split())
        return found / max(words, 1)

    @staticmethod
    def layouts(params: Any) -> list[PromptLayout]:
        return [PromptLayout.from_wire(w) for w in params.extra_kwargs[LAYOUT_KEY].values()]

    def calibrate(self, texts: list[str], target: float) -> float:
        """The exponent whose scores give ``target`` entities per word (bisection on log k)."""
        low, high = 1.0, 1e5  # density falls as the exponent grows
        for _ in range(24):
            middle = (low * high) ** 0.5
            if self.entities_per_word(texts, middle) > target:
                low = middle
            else:
                high = middle
        return (low * high) ** 0.5


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    started = time.process_time()
    value = fn()
    return time.process_time() - started, value


def one_round(profile: Profile, texts: list[str], exponent: float) -> tuple[dict, list]:
    seconds: dict[str, float] = {}
    seconds["parse"], requests = timed(lambda: [profile.parse(t) for t in texts])
    seconds["pre_process"], pending = timed(lambda: [profile.pre(r) for r in requests])
    inputs = profile.head_inputs(pending)
    seconds["head"], raw = timed(lambda: profile.run_head(inputs))
    layouts = [lay for _, _, params in pending for lay in profile.layouts(params)]
    outputs = [profile.scored(v, lay, exponent, i) for i, (v, lay) in enumerate(zip(raw, layouts))]
    at, per_request = 0, []
    for request_id, prompts, _ in pending:
        per_request.append((request_id, outputs[at : at + len(prompts)]))
        at += len(prompts)

    def post_all() -> list:
        return [profile.post(request_id, outs) for request_id, outs in per_request]

    seconds["post_process"], results = timed(post_all)
    return {k: v / len(texts) for k, v in seconds.items()}, results


class OpCounter(TorchDispatchMode):
    """Counts the dispatched torch operations that do work: not views, not allocations."""

    SKIPPED = frozenset({"empty", "empty_strided", "detach", "alias", "lift_fresh"})

    def __init__(self) -> None:
        super().__init__()
        self.count = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if not func.is_view and func.overloadpacket.__name__ not in self.SKIPPED:
            self.count += 1
        return func(*args, **(kwargs or {}))


def head_ops(profile: Profile, inputs: list) -> int:
    """Working torch operations of the head's first step (:class:`OpCounter`)."""
    counter = OpCounter()
    with torch.inference_mode(), counter:
        profile.head(*map(list, zip(*inputs[: profile.args.batch])))
    return counter.count


def top_functions(profiler: cProfile.Profile, limit: int) -> str:
    stream = io.StringIO()
    pstats.Stats(profiler, stream=stream).sort_stats("tottime").print_stats(limit)
    return stream.getvalue()


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoint", type=Path, required=True, help="gliner2-layout folder")
    parser.add_argument("--tokens", type=int, default=384, help="text tokens per text")
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--batch", type=int, default=32, help="prompts per head step")
    parser.add_argument("--instances", type=int, default=2, help="predicted count per span task")
    parser.add_argument("--density", type=float, default=0.1, help="entities per word")
    parser.add_argument("--max-model-len", type=int, default=512)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--cprofile", type=Path, help="write each process's top functions here")
    parser.add_argument("--label", default="", help="a name for this run in the JSON")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)

    texts = bench_texts(args.checkpoint, args.tokens, args.requests, args.seed)
    profile = Profile(args.checkpoint, args.max_model_len, args)
    exponent = profile.calibrate(texts[:16], args.density)
    one_round(profile, texts, exponent)  # warm-up: word-token cache, torch kernels
    best: dict[str, float] = {}
    results: list = []
    for _ in range(args.rounds):
        seconds, results = one_round(profile, texts, exponent)
        best = {k: min(v, best.get(k, float("inf"))) for k, v in seconds.items()}
    words = sum(len(t.split()) for t in texts)
    entities = sum(len(v) for r in results for v in r.get("entities", {}).values())
    records = sum(len(r.get("announcement") or []) for r in results)
    relations = sum(len(v) for r in results for v in r.get("relation_extraction", {}).values())
    us = {k: round(1e6 * v, 1) for k, v in best.items()}
    summary = {
        "api_total": round(sum(us[k] for k in API_STAGES), 1),
        "engine_total": round(sum(us[k] for k in ENGINE_STAGES), 1),
    }
    ops = head_ops(profile, profile.head_inputs([profile.pre(profile.parse(t)) for t in texts]))
    checkpoint = "/".join(args.checkpoint.parts[-2:])  # no machine path in the results
    result = {
        "label": args.label,
        "machine": {"processor": platform.processor() or platform.machine(),
                    "python": platform.python_version(), "torch": torch.__version__},
        "settings": {"tokens_per_text": args.tokens, "requests": args.requests,
                     "rounds": args.rounds, "batch": args.batch, "instances": args.instances,
                     "threshold": THRESHOLD, "max_model_len": args.max_model_len,
                     "checkpoint": checkpoint, "schema": SCHEMA},
        "calibration": {"exponent": round(exponent, 3),
                        "entities_per_word": round(entities / words, 4),
                        "records_per_text": round(records / len(texts), 3),
                        "relations_per_text": round(relations / len(texts), 3)},
        "words_per_text": round(words / len(texts), 1),
        "us_per_request": {**us, **summary},
        "head_ops_per_step": ops,
    }  # fmt: skip
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n")
    if args.cprofile:
        api, engine = cProfile.Profile(), cProfile.Profile()
        requests = [profile.parse(t) for t in texts]
        api.enable()
        pending = [profile.pre(profile.parse(t)) for t in texts]
        api.disable()
        inputs = profile.head_inputs(pending)
        engine.enable()
        raw = profile.run_head(inputs)
        engine.disable()
        del requests
        layouts = [lay for _, _, params in pending for lay in profile.layouts(params)]
        outs = [profile.scored(v, lay, exponent, i) for i, (v, lay) in enumerate(zip(raw, layouts))]
        api.enable()
        for (request_id, _, _), out in zip(pending, outs):
            profile.post(request_id, [out])
        api.disable()
        args.cprofile.write_text(
            "# API process (parse, pre_process, post_process)\n" + top_functions(api, 40)
            + "\n# engine core (head)\n" + top_functions(engine, 30)
        )  # fmt: skip


if __name__ == "__main__":
    main()
