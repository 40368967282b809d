"""The host-side plan of one batched GLiNER head pass (:class:`StepPlan`)."""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence

import numpy as np
import torch
from vllm_factory.heads.gliner.prompts import WordLayout


class StepPlan:
    """Host-side plan of one batched head pass, built from Python and CPU data only.

    Prompts are ordered by descending word count (what a packed LSTM wants). Their words lie
    back to back (``total_words`` rows), and so do their label vectors. Every gather / scatter
    index travels to the device in one copy, so the head never waits on the device mid-step.
    """

    def __init__(
        self,
        order: list[int],
        num_words: list[int],
        num_labels: list[int],
        pooling: str,
        arrays: dict[str, np.ndarray],
    ) -> None:
        self.order, self.num_words, self.num_labels = order, num_words, num_labels
        self.pooling = pooling
        self.batch = len(order)
        self.max_words, self.total_words = max(num_words), sum(num_words)
        self.total_labels = sum(num_labels)
        self.lengths = torch.tensor(num_words, dtype=torch.long)  # CPU, as LSTM packing wants
        self._arrays = arrays

    @classmethod
    def build(
        cls,
        num_tokens: Sequence[int],
        label_positions: Sequence[np.ndarray],
        layouts: Sequence[WordLayout],
        pooling: str,
        labels_in_tokens: bool = True,
    ) -> StepPlan:
        """``num_tokens[i]`` hidden rows, label token positions and word layout of prompt i.
        ``labels_in_tokens=False`` (bi-encoders): ``label_positions`` are rows of the step's
        label table, not token positions.

        A fixed number of NumPy operations on the step's words together, whatever the number
        of prompts: the engine builds one plan per step on its only thread."""
        words_of = np.array([len(layout.counts) for layout in layouts], dtype=np.int64)
        order = np.argsort(-words_of, kind="stable")  # longest first, ties in input order
        num_words = words_of[order]
        batch, max_words = len(order), int(num_words[0])
        token_offsets = np.cumsum([0, *num_tokens[:-1]], dtype=np.int64)[order]
        first_token = np.array([layouts[i].first_token for i in order], dtype=np.int64)
        counts = np.fromiter(
            itertools.chain.from_iterable(layouts[i].counts for i in order),
            dtype=np.int64,
            count=int(num_words.sum()),
        )
        prompt_of_word = np.repeat(np.arange(batch), num_words)
        row_offset = np.cumsum(num_words) - num_words  # first word row of each prompt
        rank = np.arange(len(counts)) - row_offset[prompt_of_word]  # word index in its text
        ends = np.cumsum(counts)
        before_prompt = np.concatenate(([0], ends))[row_offset]  # earlier prompts' word tokens
        starts = (token_offsets + first_token - before_prompt)[prompt_of_word] + ends - counts
        if pooling in ("first", "last"):
            present = np.flatnonzero(counts)
            word_row = (starts if pooling == "first" else starts + counts - 1)[present]
            word_of_row = present
        else:  # every sub-token, reduced into its word's row
            word_row = np.repeat(starts, counts) + _ranks(counts)
            word_of_row = np.repeat(np.arange(len(counts)), counts)
        labels = [np.asarray(label_positions[i], dtype=np.int64) for i in order]
        num_labels = np.array([len(positions) for positions in labels], dtype=np.int64)
        label_row = np.concatenate(labels)
        if labels_in_tokens:
            label_row = label_row + np.repeat(token_offsets, num_labels)
        arrays = {
            "label_row": label_row,
            "word_row": word_row,
            "word_of_row": word_of_row,
            "word_slot": prompt_of_word * max_words + rank,
            "first": row_offset[prompt_of_word],
            "length": num_words[prompt_of_word],
            # the step-wide column of the first label of each word's prompt
            "label_start": (np.cumsum(num_labels) - num_labels)[prompt_of_word],
        }
        return cls(order.tolist(), num_words.tolist(), num_labels.tolist(), pooling, arrays)

    def label_columns(self, index: dict[str, torch.Tensor]) -> torch.Tensor | None:
        """``[words, labels]``: the step-wide label columns of each word's prompt, when every
        prompt has the same number of labels (else None)."""
        if len(set(self.num_labels)) != 1:
            return None
        count = self.num_labels[0]
        offsets = torch.arange(count, device=index["label_start"].device)
        return index["label_start"].unsqueeze(1) + offsets

    def split(self, flat: torch.Tensor, max_width: int) -> list[torch.Tensor]:
        """Per prompt, in input order, its ``[words, max_width, labels]`` block of ``flat``
        (the prompts' blocks back to back, in plan order): views, no copy."""
        out: list[torch.Tensor | None] = [None] * self.batch
        at = 0
        for original, words, labels in zip(self.order, self.num_words, self.num_labels):
            size = words * max_width * labels
            out[original] = flat[at : at + size].view(words, max_width, labels)
            at += size
        return out  # type: ignore[return-value]

    def blocks(self) -> Iterator[tuple[int, slice, slice]]:
        """(input index, word rows, label columns) of every prompt."""
        rows = columns = 0
        for original, words, labels in zip(self.order, self.num_words, self.num_labels):
            yield original, slice(rows, rows + words), slice(columns, columns + labels)
            rows, columns = rows + words, columns + labels

    def device_index(self, device: torch.device) -> dict[str, torch.Tensor]:
        """Every index on ``device``, through one (pinned, asynchronous) host-to-device copy."""
        names = list(self._arrays)
        return dict(zip(names, indices_on([self._arrays[n] for n in names], device)))


def indices_on(
    indices: Sequence[Sequence[int] | np.ndarray], device: torch.device
) -> list[torch.Tensor]:
    """Host index lists as int64 tensors on ``device``, through one host-to-device copy
    (pinned and asynchronous on a GPU): one per list, in order."""
    flat = torch.from_numpy(np.concatenate([np.asarray(i, dtype=np.int64) for i in indices]))
    if device.type == "cuda":
        flat = flat.pin_memory().to(device, non_blocking=True)
    else:
        flat = flat.to(device)
    return list(flat.split([len(i) for i in indices]))


def _ranks(counts: np.ndarray) -> np.ndarray:
    """0, 1, ..., c - 1 for every c in ``counts``, concatenated."""
    total = int(counts.sum())
    return np.arange(total) - np.repeat(np.cumsum(counts) - counts, counts)
