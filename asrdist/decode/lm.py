"""An n-gram language model estimated on training transcripts, written as ARPA.

Interpolated Kneser-Ney with one absolute discount per order, D = n1 / (n1 + 2 n2) from the
count-of-counts of that order (Chen & Goodman's estimate), as KenLM and SRILM do it in spirit:
the highest order and n-grams starting with <s> use raw counts, lower orders use continuation
counts (the number of distinct words seen before the n-gram). The lowest order interpolates
with a uniform distribution over the whole vocabulary, so every word of the lexicon gets some
probability even when the training text never uses it. Interpolated probabilities are stored
as ARPA's (log10 prob, log10 backoff) pairs: the backoff of a history h is exactly the mass
D * N1+(h .) / count(h) that interpolation gives to the lower order, so each history's
distribution sums to one. No pip estimator (KenLM, SRILM) is needed: this is ~100 lines.
"""

from __future__ import annotations

import math
import os
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from asrdist.errors import AsrdistError
from asrdist.fsutil import atomic_write

BOS, EOS = "<s>", "</s>"
_NO_PROB = -99.0  # ARPA's log10 probability of <s>, which is never predicted
Ngram = tuple[str, ...]


def _discount(counts: Iterable[int]) -> float:
    """D = n1 / (n1 + 2 n2); 0.5 when the count-of-counts are too sparse to estimate it."""
    values = list(counts)
    n1 = sum(1 for c in values if c == 1)
    n2 = sum(1 for c in values if c == 2)
    if n1 == 0 or n2 == 0:
        return 0.5
    return min(max(n1 / (n1 + 2.0 * n2), 0.05), 0.95)


def _raw_counts(sentences: Iterable[Sequence[str]], order: int) -> list[dict[Ngram, int]]:
    counts: list[dict[Ngram, int]] = [defaultdict(int) for _ in range(order + 1)]
    for words in sentences:
        padded = [BOS, *words, EOS]
        for n in range(1, order + 1):
            for i in range(len(padded) - n + 1):
                gram = tuple(padded[i:i + n])
                if gram != (BOS,):
                    counts[n][gram] += 1
    return counts


def _adjusted_counts(raw: list[dict[Ngram, int]], order: int) -> list[dict[Ngram, int]]:
    """Raw counts for the top order and <s>-initial n-grams, continuation counts otherwise."""
    adjusted: list[dict[Ngram, int]] = [{} for _ in range(order + 1)]
    adjusted[order] = dict(raw[order])
    for n in range(1, order):
        continuation: dict[Ngram, int] = defaultdict(int)
        for gram in raw[n + 1]:
            continuation[gram[1:]] += 1
        for gram, count in raw[n].items():
            adjusted[n][gram] = count if gram[0] == BOS else continuation[gram]
    return adjusted


class NgramLM:
    """Interpolated Kneser-Ney n-gram probabilities, ready to write as ARPA."""

    def __init__(self, sentences: Iterable[Sequence[str]], vocab: Iterable[str], order: int = 3):
        if order < 1:
            raise AsrdistError(f"--order {order}: must be at least 1")
        sentences = [list(s) for s in sentences]
        if not any(sentences):
            raise AsrdistError("no training text to estimate the language model from")
        self.order = order
        self.vocab = sorted((set(vocab) | {w for s in sentences for w in s} | {EOS}) - {BOS})
        counts = _adjusted_counts(_raw_counts(sentences, order), order)
        self.discounts = [0.0] + [_discount(counts[n].values()) for n in range(1, order + 1)]
        # log10 probability of each seen n-gram, log10 backoff of each seen history.
        self.prob: list[dict[Ngram, float]] = [{} for _ in range(order + 1)]
        self.backoff: dict[Ngram, float] = {}
        lower: dict[Ngram, float] = {}  # linear probabilities of the order below
        for n in range(1, order + 1):
            total: dict[Ngram, int] = defaultdict(int)
            types: dict[Ngram, int] = defaultdict(int)
            for gram, count in counts[n].items():
                total[gram[:-1]] += count
                types[gram[:-1]] += 1
            d = self.discounts[n]
            gamma = {h: d * types[h] / total[h] for h in total}
            current: dict[Ngram, float] = {}
            if n == 1:
                uniform = gamma[()] / len(self.vocab)
                for w in self.vocab:
                    current[(w,)] = max(counts[1].get((w,), 0) - d, 0.0) / total[()] + uniform
            else:
                for gram, count in counts[n].items():
                    h = gram[:-1]
                    current[gram] = (count - d) / total[h] + gamma[h] * lower[gram[1:]]
                for h, g in gamma.items():
                    self.backoff[h] = math.log10(g)
            self.prob[n] = {g: math.log10(p) for g, p in current.items()}
            lower = current
        self.prob[1][(BOS,)] = _NO_PROB
        self.backoff.setdefault((BOS,), 0.0)

    def logprob(self, word: str, history: Sequence[str]) -> float:
        """log10 p(word | history) by ARPA's backoff rule (used to check the model)."""
        history = tuple(history)[-(self.order - 1):] if self.order > 1 else ()
        backoff = 0.0
        while True:
            gram = (*history, word)
            if gram in self.prob[len(gram)]:
                return backoff + self.prob[len(gram)][gram]
            if not history:
                raise KeyError(word)
            backoff += self.backoff.get(history, 0.0)
            history = history[1:]

    def write_arpa(self, path: str | os.PathLike) -> None:
        """Write the model in ARPA format (n-grams of each order in sorted order)."""
        with atomic_write(path) as f:
            f.write("\n\\data\\\n")
            for n in range(1, self.order + 1):
                f.write(f"ngram {n}={len(self.prob[n])}\n")
            for n in range(1, self.order + 1):
                f.write(f"\n\\{n}-grams:\n")
                for gram in sorted(self.prob[n]):
                    line = f"{self.prob[n][gram]:.7f}\t{' '.join(gram)}"
                    if n < self.order and gram in self.backoff:
                        line += f"\t{self.backoff[gram]:.7f}"
                    f.write(line + "\n")
            f.write("\n\\end\\\n")


@dataclass(frozen=True)
class Perplexity:
    """SRILM's ``ngram -ppl`` numbers: OOV tokens are left out of the average and counted."""

    sentences: int
    words: int
    oovs: int
    ppl: float


def perplexity(lm: NgramLM, sentences: Iterable[Sequence[str]]) -> Perplexity:
    """Per-word perplexity (``</s>`` counted, OOV words skipped) of ``sentences``: how well
    the LM predicts a test set's text, before any decoding."""
    vocab = set(lm.vocab)
    log10_sum, count, oovs, n = 0.0, 0, 0, 0
    for sentence in sentences:
        n += 1
        history: list[str] = [BOS]
        for word in [*sentence, EOS]:
            if word not in vocab:
                oovs += 1
                history = [BOS]  # the model knows no context holding it: restart
                continue
            log10_sum += lm.logprob(word, history)
            count += 1
            history.append(word)
    words = count - n + oovs
    return Perplexity(n, words, oovs, 10 ** (-log10_sum / count) if count else math.inf)


def read_training_text(path: str | os.PathLike, vocab: set[str], oov: str) -> list[list[str]]:
    """Word sequences of a Kaldi ``text`` file, words outside ``vocab`` mapped to ``oov``."""
    sentences = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            fields = line.split()
            if fields:
                sentences.append([w if w in vocab else oov for w in fields[1:]])
    if not sentences:
        raise AsrdistError(f"{path}: no utterances to estimate the language model from")
    return sentences
