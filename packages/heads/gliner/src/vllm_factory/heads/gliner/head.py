"""The GLiNER span head as a ``FactoryPooler`` (pure torch, no vLLM import).

Per prompt: encoder token states -> (projection) -> label vectors at the ``<<ENT>>`` tokens
and word vectors from each word's sub-tokens -> (BiLSTM over words) -> markerV0 span vectors
for every (start, width < max_width) -> span x label dot products -> sigmoid. Output: one
float32 ``[num_words, max_width, num_labels]`` tensor per prompt.

A prompt without a usable word layout (vLLM's start-up dummy runs send all-zero prompts with
no per-request data; a request that bypassed the GLiNER IOProcessor has none either) gets an
empty ``[0, max_width, num_labels]`` tensor: nothing may raise inside the engine, and the
IOProcessor turns an empty result for a real text into an error for that request alone.

Module and parameter names follow gliner's state dict (``token_rep_layer.projection``,
``rnn.lstm``, ``span_rep_layer.span_rep_layer.project_start``, ``prompt_rep_layer``), so
loading is a lookup.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterable, Iterator, Sequence
from typing import ClassVar

import torch
from torch import nn
from vllm_factory.core.pooler import FactoryPooler, PoolerRequest
from vllm_factory.heads.gliner.prompts import WordLayout, layout_for
from vllm_factory.heads.gliner.settings import GLiNERSettings

logger = logging.getLogger(__name__)


def projection(width: int, out: int | None = None) -> nn.Sequential:
    """gliner's two-layer MLP (Linear 4x, ReLU, Dropout, Linear); dropout is inert here."""
    out = width if out is None else out
    return nn.Sequential(
        nn.Linear(width, out * 4), nn.ReLU(), nn.Dropout(0.0), nn.Linear(out * 4, out)
    )


class TokenProjection(nn.Module):
    def __init__(self, encoder_width: int, width: int) -> None:
        super().__init__()
        self.projection = nn.Linear(encoder_width, width)


class WordLSTM(nn.Module):
    """gliner's BiLSTM over word vectors.

    In float32 it runs in IEEE float32 on the GPU too: cuDNN runs float32 RNNs in TF32 unless
    told otherwise (``torch.backends.cudnn.rnn.fp32_precision`` is ``"tf32"`` by default), which
    moved served scores by up to 1.7e-4 from gliner's float32 CPU scores on an H100. The setting
    is restored after the call; it has no effect without cuDNN.
    """

    def __init__(self, width: int, layers: int) -> None:
        super().__init__()
        self.lstm = nn.LSTM(
            width, width // 2, num_layers=layers, bidirectional=True, batch_first=True
        )

    def forward(self, words: torch.Tensor) -> torch.Tensor:
        """``[num_words, width]`` -> ``[num_words, width]``."""
        with exact_float32_rnn(words.dtype == torch.float32):
            return self.lstm(words.unsqueeze(0))[0].squeeze(0)


@contextlib.contextmanager
def exact_float32_rnn(active: bool) -> Iterator[None]:
    """cuDNN RNNs in IEEE float32 (not TF32) inside the block, when ``active``."""
    rnn = getattr(torch.backends.cudnn, "rnn", None)
    if not active or rnn is None:  # torch < 2.9 has no per-operation setting
        yield
        return
    before = rnn.fp32_precision
    rnn.fp32_precision = "ieee"
    try:
        yield
    finally:
        rnn.fp32_precision = before


class MarkerV0(nn.Module):
    """Span vector = MLP(relu([MLP_start(h[start]); MLP_end(h[end])]))."""

    def __init__(self, width: int, max_width: int) -> None:
        super().__init__()
        self.max_width = max_width
        self.project_start = projection(width)
        self.project_end = projection(width)
        self.out_project = projection(2 * width, width)

    def forward(self, words: torch.Tensor) -> torch.Tensor:
        num_words = words.shape[0]
        starts = torch.arange(num_words, device=words.device).repeat_interleave(self.max_width)
        ends = starts + torch.arange(self.max_width, device=words.device).repeat(num_words)
        # gliner multiplies the indices of spans running past the text by 0: they become (0, 0).
        outside = ends >= num_words
        starts = starts.masked_fill(outside, 0)
        ends = ends.masked_fill(outside, 0)
        joined = torch.cat((self.project_start(words)[starts], self.project_end(words)[ends]), -1)
        return self.out_project(joined.relu()).view(num_words, self.max_width, -1)


class SpanRepLayer(nn.Module):
    def __init__(self, width: int, max_width: int) -> None:
        super().__init__()
        self.span_rep_layer = MarkerV0(width, max_width)


class GLiNERSpanHead(FactoryPooler):
    needs_token_ids = True  # label markers are found in the prompt tokens
    _logged: ClassVar[set[str]] = set()  # kinds of unscored prompts already logged

    def __init__(self, settings: GLiNERSettings, dtype: torch.dtype | None = None) -> None:
        super().__init__()
        self.settings = settings
        width = settings.hidden_size
        if settings.has_projection:
            self.token_rep_layer = TokenProjection(settings.encoder_hidden_size, width)
        if settings.num_rnn_layers > 0:
            self.rnn = WordLSTM(width, settings.num_rnn_layers)
        self.span_rep_layer = SpanRepLayer(width, settings.max_width)
        self.prompt_rep_layer = projection(width)
        if dtype is not None:
            self.to(dtype)

    # -- weights ------------------------------------------------------------------------

    def load_weights(self, weights: Iterable[tuple[str, torch.Tensor]]) -> set[str]:
        """Load gliner state-dict names (``rnn.lstm.weight_ih_l0``, ...); unknown names raise."""
        params = dict(self.named_parameters())
        loaded: set[str] = set()
        for name, tensor in weights:
            param = params.get(name)
            if param is None:
                raise KeyError(f"unexpected GLiNER head weight {name!r}")
            with torch.no_grad():
                param.copy_(tensor.to(param.dtype))
            loaded.add(name)
        missing = set(params) - loaded
        if missing:
            raise KeyError(f"GLiNER head weights missing from the checkpoint: {sorted(missing)}")
        return loaded

    # -- forward --------------------------------------------------------------------------

    def forward(
        self, hidden_states: Sequence[torch.Tensor], requests: Sequence[PoolerRequest]
    ) -> list[torch.Tensor]:
        outputs = []
        for hidden, request in zip(hidden_states, requests):
            layout = layout_for(request.extra, request.token_ids)
            if layout is None or not layout.fits(min(hidden.shape[0], len(request.token_ids))):
                self._log_unscored(layout)
                outputs.append(self.no_scores(request.token_ids, hidden.device))
                continue
            outputs.append(self.score(hidden, request.token_ids, layout))
        return outputs

    def no_scores(self, token_ids: torch.Tensor | None, device: torch.device) -> torch.Tensor:
        """The well-formed empty result ``[0, max_width, num_labels]`` of an unscored prompt."""
        labels = 0
        if token_ids is not None:
            labels = int((token_ids == self.settings.class_token_index).sum())
        return torch.zeros((0, self.settings.max_width, labels), device=device)

    @classmethod
    def _log_unscored(cls, layout: WordLayout | None) -> None:
        kind = "absent" if layout is None else "mismatched"
        if kind in cls._logged:
            return
        cls._logged.add(kind)
        if layout is None:
            logger.info(
                "GLiNER head: a prompt without a word layout gets empty scores (vLLM's start-up "
                "dummy runs; real requests carry one through the GLiNER IOProcessor)"
            )
        else:
            logger.warning("GLiNER head: a word layout runs past its prompt; empty scores")

    def score(
        self, hidden: torch.Tensor, token_ids: torch.Tensor, layout: WordLayout
    ) -> torch.Tensor:
        """Sigmoid scores ``[num_words, max_width, num_labels]`` (float32) of one prompt."""
        dtype = self.prompt_rep_layer[0].weight.dtype
        tokens = hidden.to(dtype)
        if self.settings.has_projection:
            tokens = self.token_rep_layer.projection(tokens)
        labels = self.prompt_rep_layer(tokens[self.label_positions(token_ids, tokens.device)])
        words = self.word_vectors(tokens, layout)
        if self.settings.num_rnn_layers > 0:
            words = self.rnn(words)
        spans = self.span_rep_layer.span_rep_layer(words)
        logits = torch.einsum("wkd,cd->wkc", spans, labels)
        return torch.sigmoid(logits.float()).contiguous()

    def label_positions(self, token_ids: torch.Tensor, device: torch.device) -> torch.Tensor:
        positions = (token_ids == self.settings.class_token_index).nonzero().flatten()
        if not self.settings.embed_ent_token:
            positions = positions + 1  # the label's first token instead of the marker
        return positions.to(device)

    def word_vectors(self, tokens: torch.Tensor, layout: WordLayout) -> torch.Tensor:
        """One vector per word by the checkpoint's sub-token pooling; absent words are zero."""
        counts = torch.tensor(layout.counts, dtype=torch.long)
        num_words, width = len(layout.counts), tokens.shape[-1]
        words = tokens.new_zeros(num_words, width)
        present = counts > 0
        if not bool(present.any()):
            return words
        starts = layout.first_token + torch.cumsum(counts, 0) - counts
        index = present.nonzero().flatten()
        pooling = self.settings.subtoken_pooling
        if pooling in ("first", "last"):
            rows = starts[index] if pooling == "first" else starts[index] + counts[index] - 1
            words[index.to(tokens.device)] = tokens[rows.to(tokens.device)]
            return words
        owner = torch.repeat_interleave(torch.arange(num_words), counts).to(tokens.device)
        span = tokens[layout.first_token : layout.first_token + int(counts.sum())]
        reduce = "mean" if pooling == "mean" else "amax"
        words.index_reduce_(0, owner, span, reduce, include_self=False)
        return words
