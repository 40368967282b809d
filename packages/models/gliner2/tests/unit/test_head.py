"""The GLiNER2 head against a plain, unfactorised rewrite of the span architecture (span
vectors materialised, one prompt at a time), the IOProcessor's reading of its output, and its
start-up behaviour (no vLLM)."""

import numpy as np
import torch
from vllm_factory.core.pooler import PoolerRequest
from vllm_factory.heads.gliner.prompts import prompt_key
from vllm_factory.models.gliner2.decoding import split_output
from vllm_factory.models.gliner2.head import GLiNER2Head
from vllm_factory.models.gliner2.prompts import LAYOUT_KEY, Prompt, PromptLayout, Task, Words

WIDTH, MAX_WIDTH = 16, 4


def head() -> GLiNER2Head:
    torch.manual_seed(0)
    h = GLiNER2Head(WIDTH, MAX_WIDTH)
    for p in h.parameters():
        torch.nn.init.normal_(p, std=0.3)
    with torch.no_grad():  # counts of 1..3 from the [P] state
        h.count_pred[2].bias.copy_(torch.tensor([0.0, 4.0, 3.5, 3.0] + [-9.0] * 16))
    return h.eval()


def direct_spans(h: GLiNER2Head, hidden: torch.Tensor, layout: PromptLayout) -> torch.Tensor:
    """Span vectors [words, max_width, width]; spans past the text as gliner2 makes them."""
    marker = h.span_rep.span_rep_layer
    words = hidden[list(layout.word_positions)]
    n = words.shape[0]
    spans = torch.zeros(n, MAX_WIDTH, WIDTH)
    for s in range(n):
        for w in range(MAX_WIDTH):
            e = s + w if s + w < n else 0
            s2 = s if s + w < n else 0
            joined = torch.cat([marker.project_start(words[s2]), marker.project_end(words[e])])
            spans[s, w] = marker.out_project(joined.relu())
    return spans


def reference(h: GLiNER2Head, hidden: torch.Tensor, layout: PromptLayout) -> list[torch.Tensor]:
    """Counts, span scores and class logits of one prompt, computed the direct way."""
    spans = direct_spans(h, hidden, layout)
    n = spans.shape[0]
    valid = torch.arange(n)[:, None] + torch.arange(MAX_WIDTH)[None, :] < n
    counts, blocks, logits = [], [], []
    for kind, markers in layout.tasks:
        if kind == 2:
            counts.append(0.0)
            logits.append(h.classifier(hidden[list(markers[1:])]).squeeze(-1))
            continue
        count = int(h.count_pred(hidden[markers[0]]).argmax())
        counts.append(float(count))
        if count:
            queries = h.count_embed(hidden[list(markers[1:])], count)[: 1 if kind == 0 else count]
            score = torch.sigmoid(torch.einsum("lwd,cfd->cflw", spans, queries))
            blocks.append((score * valid).flatten())
    return [torch.tensor(counts), *blocks, *logits]


def test_batched_head_matches_the_direct_computation():
    h = head()
    layouts = [
        PromptLayout((10, 11, 13, 14, 15), ((0, (1, 3, 5)), (2, (6, 7, 8, 9)))),
        PromptLayout((12, 13, 14), ((1, (0, 2, 4, 6)), (1, (7, 8, 9)), (0, (10, 11)))),
        PromptLayout((4, 5, 6, 7, 8, 9, 10), ((2, (0, 1, 2)),)),
    ]
    torch.manual_seed(1)
    hidden = [torch.randn(16, WIDTH), torch.randn(15, WIDTH), torch.randn(11, WIDTH)]
    requests = []
    for i, layout in enumerate(layouts):
        ids = torch.arange(hidden[i].shape[0]) + 100 * i
        requests.append(PoolerRequest(ids, {LAYOUT_KEY: {prompt_key(ids): layout.to_wire()}}))
    with torch.no_grad():
        got = h(hidden, requests)
        for out, hid, layout in zip(got, hidden, layouts):
            want = torch.cat(reference(h, hid, layout))
            assert out.dtype == torch.float32 and out.shape == want.shape
            assert torch.allclose(out, want, atol=1e-5), (out - want).abs().max()


def test_the_io_processor_reads_each_tasks_scores():
    """``split_output``: each span task's [instances, fields, words, max_width] scores as the
    direct computation makes them, 0 past the text; counts; class logits."""
    h = head()
    layout = PromptLayout((12, 13, 14, 15), ((1, (0, 2, 4, 6)), (2, (7, 8, 9)), (0, (10, 11))))
    kinds = {0: "entities", 1: "relations", 2: "classifications"}
    tasks = [
        Task(kinds[kind], [], [f"f{i}" for i in range(len(markers) - 1)])
        for kind, markers in layout.tasks
    ]
    words = Words("a b c d", ["a", "b", "c", "d"], [0, 2, 4, 6], [1, 3, 5, 7])
    prompt = Prompt([], layout, tasks, words, words.tokens)
    torch.manual_seed(3)
    hidden = torch.randn(16, WIDTH)
    ids = torch.arange(16)
    request = PoolerRequest(ids, {LAYOUT_KEY: {prompt_key(ids): layout.to_wire()}})
    with torch.no_grad():
        vector = h([hidden], [request])[0].numpy()
        spans = direct_spans(h, hidden, layout)
        items = split_output(vector, prompt, MAX_WIDTH)
        n = len(layout.word_positions)
        valid = torch.arange(n)[:, None] + torch.arange(MAX_WIDTH)[None, :] < n
        for item, (kind, markers) in zip(items, layout.tasks):
            if kind == 2:
                want = h.classifier(hidden[list(markers[1:])]).squeeze(-1)
                assert item.scores is None and np.allclose(item.logits, want, atol=1e-5)
                continue
            count = int(h.count_pred(hidden[markers[0]]).argmax())
            assert item.count == count > (0 if kind == 0 else 1)  # entities 1+, relations 2+
            queries = h.count_embed(hidden[list(markers[1:])], count)[: 1 if kind == 0 else count]
            want = torch.sigmoid(torch.einsum("lwd,cfd->cflw", spans, queries)) * valid
            assert item.scores.shape == want.shape
            assert np.allclose(item.scores, want.numpy(), atol=1e-5)


def test_prompts_without_a_layout_get_an_empty_result():
    """vLLM's start-up dummy runs: all-zero ids, no per-request data, never an exception."""
    h = head()
    hidden = [torch.randn(8, WIDTH), torch.randn(3, WIDTH)]
    ids = torch.zeros(8, dtype=torch.long)
    bad = {LAYOUT_KEY: {prompt_key(ids): [99, 1, 2]}}  # malformed: ignored, not raised
    with torch.no_grad():
        out = h(hidden, [PoolerRequest(ids, bad), PoolerRequest(None, {})])
    assert [o.shape for o in out] == [(0,), (0,)]


def test_layout_wire_round_trip_and_rejects_garbage():
    layout = PromptLayout((3, 4, 5), ((0, (1, 2)), (2, (6, 7, 8))))
    assert PromptLayout.from_wire(layout.to_wire()) == layout
    for wire in ([1, 2], [2, 3, 4, 1, 7, 1, 1], [1, 3, 1, 0, 0]):
        try:
            PromptLayout.from_wire(wire)
        except (ValueError, IndexError):
            continue
        raise AssertionError(f"accepted {wire}")
