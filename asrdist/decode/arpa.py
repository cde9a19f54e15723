"""An ARPA n-gram LM read as Kaldi's ``G.carpa`` holds it, and looked up as ConstArpaLm does.

Kaldi rescores with a ConstArpaLm built by utils/build_const_arpa_lm.sh: ``map_arpa_lm.pl
words.txt`` first drops every n-gram with a word outside words.txt, then ``arpa-to-const-arpa
--bos-symbol --eos-symbol --unk-symbol=$(cat oov.int)`` stores each log10 value read as a
float and times ln 10, in float (ArpaFileParser). The same is done here, so the costs are
Kaldi's to the bit:

- :meth:`ArpaLM.logprob` is ConstArpaLm::GetNgramLogprob: the history cut to order-1 words;
  a word (or history word) with no unigram in the LM taken as the unk word; then the usual
  backoff recursion, ``backoff + logprob(word | shorter history)`` summed in float32, and
  -inf when not even a unigram exists (no unk unigram either).
- a leaf n-gram's probability (order 2 or more, no children, no backoff) loses the lowest bit
  of its float, as ConstArpaLm stores it in the child slot that otherwise holds an address;
- :meth:`ArpaLM.history_exists` is ConstArpaLm::HistoryStateExists: a history names an LM
  state only when it is an n-gram of the LM that has children; the raw word ids are looked
  up there, so a history holding an out-of-LM word backs off to the empty one.

A malformed file is one line naming the file, the line number and what is wrong (as Kaldi's
parser says it).
"""

from __future__ import annotations

import gzip
import logging
import math
import os
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from asrdist.errors import AsrdistError

log = logging.getLogger(__name__)

F32 = np.float32
NEG_INF = F32(-np.inf)
_LN10 = math.log(10.0)  # M_LN10
Ngram = tuple[int, ...]


def _to_float(text: str) -> float:
    """A log10 value as ArpaFileParser keeps it: read as float, times ln 10 in double, then
    float again (``ngram.logprob *= M_LN10`` on a float)."""
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(text)
    return float(F32(float(F32(value)) * _LN10))


def _lines(path: Path) -> Iterator[tuple[int, str]]:
    opener = gzip.open if path.name.endswith(".gz") else open
    try:
        with opener(path, "rt", encoding="utf-8") as f:
            yield from enumerate(f, start=1)
    except (OSError, EOFError, UnicodeDecodeError) as e:
        raise AsrdistError(f"{path}: cannot read the ARPA LM ({e})") from e


class ArpaLM:
    """The n-grams of an ARPA file over the integer ids of a words.txt."""

    def __init__(self, order: int, bos: int, eos: int, unk: int | None) -> None:
        self.order = order
        self.bos, self.eos, self.unk = bos, eos, unk
        self.prob: dict[Ngram, float] = {}  # natural-log probability (float32 values)
        self.backoff: dict[Ngram, float] = {}  # natural-log backoff, where the file gives one
        self.parents: set[Ngram] = set()  # n-grams with at least one child (LM states)
        self.skipped = 0  # n-grams dropped for a word outside words.txt

    def logprob(self, word: int, hist: Ngram) -> float:
        """ln p(word | hist) as ConstArpaLm::GetNgramLogprob gives it (a float32 value);
        -inf when the LM cannot score the word."""
        hist = hist[len(hist) - self.order + 1:] if len(hist) >= self.order else hist
        if self.unk is not None:
            word = word if (word,) in self.prob else self.unk
            hist = tuple(w if (w,) in self.prob else self.unk for w in hist)
        return self._logprob(word, hist)

    def _logprob(self, word: int, hist: Ngram) -> float:
        if not hist:
            return self.prob.get((word,), NEG_INF)
        backoff = 0.0
        if hist in self.prob:  # the history is an LM state (GetLmState)
            found = self.prob.get((*hist, word))
            if found is not None:
                return found
            backoff = self.backoff.get(hist, 0.0)
        return float(F32(backoff) + F32(self._logprob(word, hist[1:])))

    def history_exists(self, hist: Ngram) -> bool:
        """Whether ``hist`` (raw word ids) is a history state of the LM."""
        return not hist or hist in self.parents


def read_arpa(path: str | os.PathLike, words: dict[str, int], unk: str | None) -> ArpaLM:
    """An ARPA file (gzipped when its name ends in .gz), its words mapped through ``words``
    (words.txt): n-grams with a word not in it are dropped, as map_arpa_lm.pl drops them.
    ``unk`` (the lang's oov word) scores words that the LM lacks; None scores them -inf."""
    path = Path(path)
    if not path.is_file():
        raise AsrdistError(f"{path}: no such ARPA LM")
    for symbol in ("<s>", "</s>"):
        if symbol not in words:
            raise AsrdistError(f"{path}: {symbol} is not in words.txt")
    if unk is not None and unk not in words:
        raise AsrdistError(f"{path}: the oov word {unk!r} is not in words.txt")
    lines = _lines(path)
    counts, (line, no) = _read_header(path, lines)
    lm = ArpaLM(len(counts), words["<s>"], words["</s>"],
                words[unk] if unk is not None else None)
    for order in range(1, lm.order + 1):
        if line != f"\\{order}-grams:":
            raise AsrdistError(f"{path}:{no}: expected '\\{order}-grams:', found {line!r}")
        seen = 0
        line, no = _next_text(lines)
        while line is not None and not line.startswith("\\"):
            seen += 1
            if seen > counts[order - 1]:
                raise AsrdistError(f"{path}:{no}: more {order}-grams than the header's "
                                   f"{counts[order - 1]}")
            _add_ngram(lm, path, no, line, order, words)
            line, no = _next_text(lines)
    if line != "\\end\\":
        raise AsrdistError(f"{path}:{no}: expected '\\end\\', found "
                           f"{'the end of the file' if line is None else repr(line)}")
    _store_leaves_as_carpa(lm)
    if lm.skipped:
        log.warning("%s: %d n-grams skipped: a word not in words.txt", path, lm.skipped)
    return lm


def _store_leaves_as_carpa(lm: ArpaLM) -> None:
    """ConstArpaLm keeps the probability of a leaf n-gram (order >= 2, no children, no
    backoff) in its parent's child slot, the float's lowest bit cleared to mark it a value,
    not an address: those probabilities lose that bit here too."""
    for gram, prob in lm.prob.items():
        if len(gram) > 1 and gram not in lm.parents and not lm.backoff.get(gram, 0.0):
            lm.prob[gram] = float((F32(prob).view(np.int32) & ~np.int32(1)).view(F32))


def _next_text(lines: Iterator[tuple[int, str]]) -> tuple[str | None, int]:
    """The next non-blank line, stripped, and its number; (None, last number) at the end."""
    no = 0
    for no, raw in lines:
        text = raw.strip()
        if text:
            return text, no
    return None, no


def _read_header(path: Path, lines: Iterator[tuple[int, str]]
                 ) -> tuple[list[int], tuple[str | None, int]]:
    """The n-gram counts of the \\data\\ section, order by order, and the directive line that
    ends it (with its number)."""
    for _no, raw in lines:
        if raw.strip() == "\\data\\":
            break
    else:
        raise AsrdistError(f"{path}: no \\data\\ section (not an ARPA LM)")
    counts: dict[int, int] = {}
    text, no = _next_text(lines)
    while text is not None and not text.startswith("\\"):
        key, _, value = text.partition("=")
        fields = key.split()
        try:
            if len(fields) != 2 or fields[0] != "ngram":
                raise ValueError
            order, count = int(fields[1]), int(value)
        except ValueError:
            raise AsrdistError(f"{path}:{no}: expected 'ngram N=COUNT' in the \\data\\ "
                               f"section, found {text!r}") from None
        if order < 1 or count < 0 or order in counts:
            raise AsrdistError(f"{path}:{no}: bad n-gram count line {text!r}")
        counts[order] = count
        text, no = _next_text(lines)
    if not counts or sorted(counts) != list(range(1, len(counts) + 1)):
        raise AsrdistError(f"{path}: the \\data\\ section gives no n-gram counts for orders "
                           "1..N")
    return [counts[n] for n in range(1, len(counts) + 1)], (text, no)


def _add_ngram(lm: ArpaLM, path: Path, no: int, line: str, order: int,
               words: dict[str, int]) -> None:
    fields = line.split()
    top = order == lm.order
    if not order + 1 <= len(fields) <= order + 2 or (top and len(fields) != order + 1):
        raise AsrdistError(f"{path}:{no}: invalid {order}-gram line {line!r} (expected "
                           f"'logprob {' '.join(['word'] * order)}"
                           f"{'' if top else ' [backoff]'}')")
    try:
        prob = _to_float(fields[0])
    except ValueError:
        raise AsrdistError(f"{path}:{no}: invalid log-probability {fields[0]!r}") from None
    backoff = None
    if len(fields) == order + 2:
        try:
            backoff = _to_float(fields[-1])
        except ValueError:
            raise AsrdistError(f"{path}:{no}: invalid backoff weight {fields[-1]!r}") from None
    ids = tuple(words.get(w, -1) for w in fields[1:order + 1])
    if -1 in ids:
        lm.skipped += 1
        return
    if 0 in ids:
        raise AsrdistError(f"{path}:{no}: the epsilon word is not allowed in an ARPA LM")
    if ids in lm.prob:
        raise AsrdistError(f"{path}:{no}: {order}-gram {' '.join(fields[1:order + 1])!r} "
                           "appears twice")
    if order > 1:
        if ids[:-1] not in lm.prob:
            raise AsrdistError(f"{path}:{no}: {order}-gram {' '.join(fields[1:order + 1])!r} "
                               f"has no parent {order - 1}-gram")
        lm.parents.add(ids[:-1])
    lm.prob[ids] = prob
    if backoff is not None:
        lm.backoff[ids] = backoff
