"""The LJSpeech recipe's language-model text, its 4-gram for lattice rescoring, and perplexities.

The graph's trigram is estimated by asrdist-mkgraph from the same text (``--text --order 3``);
the 4-gram here is made by the same estimator over the same lang words
(asrdist.decode.graph.estimate_lm: interpolated Kneser-Ney, asrdist.decode.lm), so the two
differ only in their order and the rescoring changes nothing but the longer context.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from asrdist.decode.lm import EOS, NgramLM
from asrdist.fsutil import atomic_write
from asrdist.kaldi.data_dir import c_sorted

RESCORE_ORDER = 4
GRAPH_ORDER = 3


@dataclass(frozen=True)
class Perplexity:
    """SRILM's ``ngram -ppl`` numbers: OOV tokens are left out of the average and counted."""

    sentences: int
    words: int
    oovs: int
    ppl: float


def write_lm_text(path: Path, texts: dict[str, str]) -> None:
    """The LM sentences as a Kaldi ``text`` (id words), what asrdist-mkgraph --text reads."""
    with atomic_write(path) as f:
        f.writelines(f"{clip} {texts[clip]}\n" for clip in c_sorted(texts))


def perplexity(lm: NgramLM, sentences: Iterable[Sequence[str]]) -> Perplexity:
    """Per-word perplexity (``</s>`` counted, OOV words skipped) of ``sentences``."""
    vocab = set(lm.vocab)
    log10_sum, count, oovs, n = 0.0, 0, 0, 0
    for sentence in sentences:
        n += 1
        history: list[str] = ["<s>"]
        for word in [*sentence, EOS]:
            if word not in vocab:
                oovs += 1
                history = ["<s>"]  # the model knows no context holding it: restart
                continue
            log10_sum += lm.logprob(word, history)
            count += 1
            history.append(word)
    words = count - n + oovs
    return Perplexity(n, words, oovs, 10 ** (-log10_sum / count) if count else math.inf)
