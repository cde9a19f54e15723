from __future__ import annotations

import itertools

import numpy as np

from asrdist.corpus.sentences import (
    MAX_WORDS,
    MIN_WORDS,
    SentenceGrammar,
    _plural,
    _third_person,
    iter_unique_sentences,
)

# About as many sentences as the default 3 hours of train audio holds.
DEFAULT_TRAIN_SENTENCES = 2500


def _take(seed: int, stream: int, n: int, exclude=()) -> list[str]:
    return list(itertools.islice(iter_unique_sentences(seed, stream, exclude), n))


def test_same_seed_same_sentences_other_seed_others():
    assert _take(0, 1, 50) == _take(0, 1, 50)
    assert _take(0, 1, 50) != _take(1, 1, 50)
    assert _take(0, 1, 50) != _take(0, 0, 50)


def test_sentence_lengths_and_words_stay_in_the_vocabulary():
    grammar = SentenceGrammar()
    vocab = grammar.vocabulary()
    rng = np.random.default_rng(3)
    for _ in range(500):
        words = grammar.sentence(rng).split()
        assert MIN_WORDS <= len(words) <= MAX_WORDS
        assert set(words) <= vocab


def test_default_size_generation_uses_at_least_500_words():
    sentences = _take(0, 1, DEFAULT_TRAIN_SENTENCES)
    assert len(set(sentences)) == DEFAULT_TRAIN_SENTENCES
    assert len({w for s in sentences for w in s.split()}) >= 500


def test_excluded_sentences_never_come_out():
    test_set = set(_take(0, 0, 300))
    # Excluding the first sentences of the same stream forces the skip path to run.
    train = _take(0, 0, 600, exclude=test_set)
    assert not test_set & set(train)


def test_inflection_rules():
    assert [_plural(n) for n in ("dog", "box", "city", "day", "child")] == [
        "dogs", "boxes", "cities", "days", "children"]
    assert [_third_person(v) for v in ("run", "watch", "carry", "play", "go")] == [
        "runs", "watches", "carries", "plays", "goes"]
