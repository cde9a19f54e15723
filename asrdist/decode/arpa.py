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
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from asrdist.errors import AsrdistError

log = logging.getLogger(__name__)

F32 = np.float32
NEG_INF = F32(-np.inf)
_LN10 = math.log(10.0)  # M_LN10
Ngram = tuple[int, ...]
_CHUNK = 1 << 16  # lines of a section parsed at a time


def _log_column(tokens: list[str], lines: np.ndarray, path: Path, what: str) -> np.ndarray:
    """log10 values as ArpaFileParser keeps them: each read as a float, times ln 10 in double,
    then float again (``ngram.logprob *= M_LN10`` on a float)."""
    try:
        values = np.array(tokens, dtype=np.float64)
    except ValueError:
        for token, no in zip(tokens, lines.tolist(), strict=True):
            try:
                float(token)
            except ValueError:
                raise AsrdistError(f"{path}:{no}: invalid {what} {token!r}") from None
        raise
    return (values.astype(F32).astype(np.float64) * _LN10).astype(F32)


def _lines(path: Path) -> Iterator[tuple[int, str]]:
    opener = gzip.open if path.name.endswith(".gz") else open
    try:
        with opener(path, "rt", encoding="utf-8") as f:
            yield from enumerate(f, start=1)
    except (OSError, EOFError, UnicodeDecodeError) as e:
        raise AsrdistError(f"{path}: cannot read the ARPA LM ({e})") from e


@dataclass
class _Table:
    """The n-grams of one order, sorted by key: (index of the n-gram's history among the
    order below) * num_words + its last word; a unigram's key is its word."""

    keys: np.ndarray  # int64
    prob: np.ndarray  # float32, natural log
    backoff: np.ndarray  # float32, natural log (0 where the file gives none)
    parent: np.ndarray  # bool: the n-gram has children (it is a history state)

    def find(self, key: int) -> int:
        pos = int(np.searchsorted(self.keys, key))
        return pos if pos < len(self.keys) and self.keys[pos] == key else -1


class ArpaLM:
    """The n-grams of an ARPA file over the integer ids of a words.txt, in sorted arrays per
    order (16 bytes an n-gram: a 4-gram LM of tens of millions of n-grams fits in a job)."""

    def __init__(self, order: int, bos: int, eos: int, unk: int | None, num_words: int) -> None:
        self.order = order
        self.bos, self.eos, self.unk = bos, eos, unk
        self.num_words = num_words
        self.tables: list[_Table] = []  # tables[n - 1]: the n-grams
        self.unigram = np.full(num_words, -1, dtype=np.int64)  # word -> its unigram's index
        self.skipped = 0  # n-grams dropped for a word outside words.txt

    def index(self, gram: Ngram) -> int:
        """The index of ``gram`` in its order's table; -1 when the LM lacks it."""
        i = self.unigram[gram[0]] if 0 <= gram[0] < self.num_words else -1
        for n, word in enumerate(gram[1:], 1):
            if i < 0:
                return -1
            i = self.tables[n].find(int(i) * self.num_words + word)
        return int(i)

    def logprob(self, word: int, hist: Ngram) -> float:
        """ln p(word | hist) as ConstArpaLm::GetNgramLogprob gives it (a float32 value);
        -inf when the LM cannot score the word."""
        hist = hist[len(hist) - self.order + 1:] if len(hist) >= self.order else hist
        if self.unk is not None:
            word = word if self.index((word,)) >= 0 else self.unk
            hist = tuple(w if self.index((w,)) >= 0 else self.unk for w in hist)
        return self._logprob(word, hist)

    def _logprob(self, word: int, hist: Ngram) -> float:
        if not hist:
            i = self.index((word,))
            return float(self.tables[0].prob[i]) if i >= 0 else float(NEG_INF)
        backoff = F32(0.0)
        h = self.index(hist)
        if h >= 0:  # the history is an LM state (GetLmState)
            found = self.tables[len(hist)].find(h * self.num_words + word)
            if found >= 0:
                return float(self.tables[len(hist)].prob[found])
            backoff = self.tables[len(hist) - 1].backoff[h]
        return float(backoff + F32(self._logprob(word, hist[1:])))

    def history_exists(self, hist: Ngram) -> bool:
        """Whether ``hist`` (raw word ids) is a history state of the LM."""
        if not hist:
            return True
        h = self.index(hist)
        return h >= 0 and bool(self.tables[len(hist) - 1].parent[h])


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
                words[unk] if unk is not None else None, max(words.values()) + 1)
    for order in range(1, lm.order + 1):
        if line != f"\\{order}-grams:":
            raise AsrdistError(f"{path}:{no}: expected '\\{order}-grams:', found {line!r}")
        line, no = _read_order(lm, path, lines, order, counts[order - 1], words)
    if line != "\\end\\":
        raise AsrdistError(f"{path}:{no}: expected '\\end\\', found "
                           f"{'the end of the file' if line is None else repr(line)}")
    _store_leaves_as_carpa(lm)
    if lm.skipped:
        log.warning("%s: %d n-grams skipped: a word not in words.txt", path, lm.skipped)
    return lm


def _read_order(lm: ArpaLM, path: Path, lines: Iterator[tuple[int, str]], order: int,
                count: int, words: dict[str, int]) -> tuple[str | None, int]:
    """The n-grams of one order into ``lm.tables``, read in chunks; returns the line that
    ends the section (and its number)."""
    parts: list[tuple[np.ndarray, ...]] = []
    chunk: list[tuple[int, str]] = []
    seen, line, no = 0, None, 0
    for no, raw in lines:
        line = raw.strip()
        if not line:
            continue
        if line.startswith("\\"):
            break
        seen += 1
        if seen > count:
            raise AsrdistError(f"{path}:{no}: more {order}-grams than the header's {count}")
        chunk.append((no, line))
        if len(chunk) == _CHUNK:
            parts.append(_parse_chunk(lm, path, chunk, order, words))
            chunk = []
    else:
        line = None
    if chunk:
        parts.append(_parse_chunk(lm, path, chunk, order, words))
    keys, prob, backoff, where = (np.concatenate([p[i] for p in parts]) if parts else
                                  np.zeros(0, d) for i, d in
                                  enumerate((np.int64, F32, F32, np.int64)))
    sort = np.argsort(keys, kind="stable")
    keys, prob, backoff, where = keys[sort], prob[sort], backoff[sort], where[sort]
    twice = np.flatnonzero(keys[1:] == keys[:-1])
    if len(twice):
        j = int(twice[0])
        raise AsrdistError(f"{path}:{max(where[j], where[j + 1])}: this {order}-gram appears "
                           "twice")
    lm.tables.append(_Table(keys, prob, backoff, np.zeros(len(keys), dtype=bool)))
    if order == 1:
        lm.unigram[keys] = np.arange(len(keys))
    return line, no


def _parse_chunk(lm: ArpaLM, path: Path, chunk: list[tuple[int, str]], order: int,
                 words: dict[str, int]) -> tuple[np.ndarray, ...]:
    """Keys, probabilities, backoffs and line numbers of a chunk of one order's lines (those
    with a word outside words.txt left out); their histories marked as parents."""
    where = np.array([no for no, _ in chunk], dtype=np.int64)
    fields = [text.split() for _, text in chunk]
    sizes = np.fromiter(map(len, fields), dtype=np.int64, count=len(fields))
    top = order == lm.order
    bad = (sizes < order + 1) | (sizes > (order + 1 if top else order + 2))
    if bad.any():
        i = int(np.argmax(bad))
        raise AsrdistError(f"{path}:{where[i]}: invalid {order}-gram line {chunk[i][1]!r} "
                           f"(expected 'logprob {' '.join(['word'] * order)}"
                           f"{'' if top else ' [backoff]'}')")
    prob = _log_column([f[0] for f in fields], where, path, "log-probability")
    backoff = np.zeros(len(fields), dtype=F32)
    given = np.flatnonzero(sizes == order + 2)
    if len(given):
        backoff[given] = _log_column([fields[i][-1] for i in given.tolist()], where[given],
                                     path, "backoff weight")
    tokens, slot = np.unique(np.array([f[1:order + 1] for f in fields]), return_inverse=True)
    ids = np.array([words.get(t, -1) for t in tokens.tolist()], dtype=np.int64)[slot]
    ids = ids.reshape(-1, order)
    known = (ids >= 0).all(axis=1)
    lm.skipped += int(len(ids) - known.sum())
    ids, prob, backoff, where = ids[known], prob[known], backoff[known], where[known]
    if (ids == 0).any():
        i = int(np.argmax((ids == 0).any(axis=1)))
        raise AsrdistError(f"{path}:{where[i]}: the epsilon word is not allowed in an ARPA LM")
    if order == 1:
        return ids[:, 0], prob, backoff, where
    parent = lm.unigram[ids[:, 0]]
    for n in range(1, order - 1):
        parent = _lookup(lm.tables[n], parent, ids[:, n], lm.num_words)
    if (parent < 0).any():
        i = int(np.argmax(parent < 0))
        gram = " ".join(next(t for n, t in chunk if n == where[i]).split()[1:order + 1])
        raise AsrdistError(f"{path}:{where[i]}: {order}-gram {gram!r} has no parent "
                           f"{order - 1}-gram")
    lm.tables[order - 2].parent[parent] = True
    return parent * lm.num_words + ids[:, -1], prob, backoff, where


def _lookup(table: _Table, parent: np.ndarray, words: np.ndarray,
            num_words: int) -> np.ndarray:
    """The indexes in ``table`` of the n-grams (history index, word); -1 where absent."""
    if not len(table.keys):
        return np.full(len(parent), -1, dtype=np.int64)
    key = parent * num_words + words
    pos = np.minimum(np.searchsorted(table.keys, key), len(table.keys) - 1)
    return np.where((parent >= 0) & (table.keys[pos] == key), pos, -1)


def _store_leaves_as_carpa(lm: ArpaLM) -> None:
    """ConstArpaLm keeps the probability of a leaf n-gram (order >= 2, no children, no
    backoff) in its parent's child slot, the float's lowest bit cleared to mark it a value,
    not an address: those probabilities lose that bit here too."""
    for table in lm.tables[1:]:
        leaf = ~table.parent & (table.backoff == 0)
        table.prob[leaf] = (table.prob[leaf].view(np.int32) & ~np.int32(1)).view(F32)


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
