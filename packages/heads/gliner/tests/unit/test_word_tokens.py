"""The per-word token cache gives exactly the tokenizer's own ``is_split_into_words`` call, for
the three kinds of fast tokenizer GLiNER encoders ship (SentencePiece-style Unigram, byte-level
BPE, WordPiece), built offline here; and it steps aside where it cannot be exact."""

from __future__ import annotations

import random

import pytest
from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors
from transformers import PreTrainedTokenizerFast
from vllm_factory.heads.gliner import word_tokens
from vllm_factory.heads.gliner.word_tokens import WordTokenizer

CORPUS = [
    "The Ada Lovelace Institute opened in London on 3 March 2024, costing $4.5m.",
    "naïve café owners in São Paulo and Zürich met 東京 and Москва delegates at 12:30pm",
    "state-of-the-art e-mail filters don't stop U.S.A. spam 🙂 anymore",
] * 20
MARKERS = ["<<ENT>>", "<<SEP>>"]


def _unigram() -> Tokenizer:
    from tokenizers.trainers import UnigramTrainer

    tok = Tokenizer(models.Unigram())
    tok.normalizer = normalizers.Sequence([normalizers.NFKC(), normalizers.Replace("``", '"')])
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="first")
    tok.decoder = decoders.Metaspace()
    trainer = UnigramTrainer(vocab_size=300, special_tokens=["<pad>", "</s>", "<unk>"],
                             unk_token="<unk>")  # fmt: skip
    tok.train_from_iterator(CORPUS, trainer)
    tok.post_processor = processors.TemplateProcessing(
        single="$A </s>", special_tokens=[("</s>", tok.token_to_id("</s>"))]
    )
    return tok


def _byte_bpe() -> Tokenizer:
    from tokenizers.trainers import BpeTrainer

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=True)
    tok.decoder = decoders.ByteLevel()
    trainer = BpeTrainer(vocab_size=400, special_tokens=["<s>", "</s>", "<pad>"],
                         initial_alphabet=pre_tokenizers.ByteLevel.alphabet())  # fmt: skip
    tok.train_from_iterator(CORPUS, trainer)
    tok.post_processor = processors.TemplateProcessing(
        single="<s> $A </s>",
        special_tokens=[("<s>", tok.token_to_id("<s>")), ("</s>", tok.token_to_id("</s>"))],
    )
    return tok


def _wordpiece() -> Tokenizer:
    from tokenizers.trainers import WordPieceTrainer

    tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True, strip_accents=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    trainer = WordPieceTrainer(vocab_size=300, special_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]"])
    tok.train_from_iterator(CORPUS, trainer)
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]",
        special_tokens=[("[CLS]", tok.token_to_id("[CLS]")), ("[SEP]", tok.token_to_id("[SEP]"))],
    )
    return tok


def _fast(build) -> PreTrainedTokenizerFast:
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=build(), model_max_length=512)
    tokenizer.add_tokens(MARKERS, special_tokens=True)
    return tokenizer


@pytest.fixture(scope="module", params=[_unigram, _byte_bpe, _wordpiece],
                ids=["unigram", "byte-bpe", "wordpiece"])  # fmt: skip
def tokenizer(request) -> PreTrainedTokenizerFast:
    return _fast(request.param)


def _word(rng: random.Random) -> str:
    pool = ["the", "of", "London", "Ada", "naïve", "café", "2024", "e-mail", "don't", "🙂"]
    pool += MARKERS
    if rng.random() < 0.6:
        return rng.choice(pool)
    alphabet = "abcXYZ0189éüß東Мο–…'\".,;:!?()$€%@#-_/\\🙂\u200b\u00a0\u0301"
    return "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 8)))


@pytest.mark.parametrize("max_length", [512, 24])
def test_cache_gives_the_tokenizers_own_ids_and_word_ids(tokenizer, max_length):
    words = WordTokenizer(tokenizer, max_length)
    assert words.cached
    rng = random.Random(max_length)
    for _ in range(150):
        sample = [_word(rng) for _ in range(rng.randint(1, 300))]
        ids, word_ids = words(sample)
        own = tokenizer(sample, is_split_into_words=True, truncation=True, max_length=max_length)
        assert ids == list(own["input_ids"])
        assert word_ids == own.word_ids()
        assert len(ids) <= max_length


def test_steps_aside_for_left_truncation(tokenizer):
    tokenizer.truncation_side = "left"
    try:
        words = WordTokenizer(tokenizer, 16)
        assert not words.cached
        sample = ["London"] * 40
        own = tokenizer(sample, is_split_into_words=True, truncation=True, max_length=16)
        assert words(sample)[0] == list(own["input_ids"])
    finally:
        tokenizer.truncation_side = "right"


def test_steps_aside_when_its_probe_disagrees(tokenizer, monkeypatch):
    monkeypatch.setattr(WordTokenizer, "_special_tokens", lambda self: ([0], []))
    words = WordTokenizer(tokenizer, 64)
    assert not words.cached
    own = tokenizer(["Ada"], is_split_into_words=True, truncation=True, max_length=64)
    assert words(["Ada"])[0] == list(own["input_ids"])
    from vllm_factory.heads.gliner.prompts import layout_from_word_ids

    own = tokenizer(["<<SEP>>", "Ada"], is_split_into_words=True, truncation=True, max_length=64)
    ids, layout = words.prompt(["<<SEP>>", "Ada"], 1)  # the tokenizer's own call and word ids
    assert ids == list(own["input_ids"])
    assert layout == layout_from_word_ids(own.word_ids(), 1, 1) and layout.counts[0] > 0


def test_cache_is_bounded(tokenizer, monkeypatch):
    monkeypatch.setattr(word_tokens, "CACHE_WORDS", 8)
    words = WordTokenizer(tokenizer, 512)
    sample = [f"w{i}" for i in range(50)]
    own = tokenizer(sample, is_split_into_words=True, truncation=True, max_length=512)
    assert words(sample)[0] == list(own["input_ids"])
    assert len(words._cache) <= 8


def test_calls_do_not_change_the_tokenizers_own_settings(tokenizer):
    words = WordTokenizer(tokenizer, 20)
    words(["London"] * 30)
    long = tokenizer(["London"] * 30, is_split_into_words=True)
    assert len(long["input_ids"]) > 20  # no truncation left behind on the shared tokenizer


@pytest.mark.parametrize("max_length", [512, 24])
def test_prompt_layout_is_the_one_of_the_tokenizers_own_word_ids(tokenizer, max_length):
    """The cached path's layout (from token counts) equals the layout of the tokenizer's own
    ``word_ids()``, with label-prompt words first and truncation into the text."""
    from vllm_factory.heads.gliner.prompts import layout_from_word_ids

    words = WordTokenizer(tokenizer, max_length)
    rng = random.Random(7 + max_length)
    for _ in range(150):
        prompt = [rng.choice(MARKERS + ["person", "city"]) for _ in range(rng.randint(0, 9))]
        sample = prompt + [_word(rng) for _ in range(rng.randint(0, 300))]
        ids, layout = words.prompt(sample, len(prompt))
        own = tokenizer(sample, is_split_into_words=True, truncation=True, max_length=max_length)
        expected = layout_from_word_ids(own.word_ids(), len(prompt), len(sample) - len(prompt))
        assert ids == list(own["input_ids"]) and layout == expected


def test_word_counts_and_prompt_length_with_and_without_the_cache(tokenizer):
    """Each word's token count and a prompt's length without truncation: the same from the
    cache and from the tokenizer's own call (the fallback), and what the tokenizer makes."""
    rng = random.Random(11)
    sample = [_word(rng) for _ in range(300)]
    cached = WordTokenizer(tokenizer, 24)
    assert cached.cached
    own = WordTokenizer(tokenizer, 24)
    own.cached = False
    counts = cached.word_counts(sample)
    assert own.word_counts(sample) == counts
    whole = tokenizer(sample, is_split_into_words=True, truncation=False)
    assert cached.prompt_length(sample) == own.prompt_length(sample) == len(whole["input_ids"])
    assert sum(counts) + cached.special_tokens() == len(whole["input_ids"]) > 24
    assert cached.special_tokens() == own.special_tokens() > 0
    assert own.word_counts([]) == []
