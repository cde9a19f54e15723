"""Kaldi's ``G.carpa`` (ConstArpaLm, lm/const-arpa-lm.cc) read as it is and looked up as
ConstArpaLm::GetNgramLogprob does, for rescoring with a lang dir that utils/build_const_arpa_lm.sh
made (steps/lmrescore_const_arpa.sh's NEW_LANG) instead of its ARPA file.

The file (binary Kaldi object, ``\\0B``): tokens ``<ConstArpaLm> <LmInfo>``, bos, eos, unk
(-1: none) and order as int32, then ``<LmStates>``: an int64 count and that many int32 words
holding the LM states, each ``logprob, backoff, #children`` (floats as their bits) followed
by ``(word, child info)`` per child, sorted by word; ``<LmUnigram>``: #words and per word an
int64 (0: no unigram, else 1 + its state's offset); ``<LmOverflow>``: the addresses of children
too far for 30 bits. A child's info is even for a leaf (its float probability with the lowest
bit cleared), odd for a state: ``info / 2`` (C division) is its offset from the parent when
positive, minus its overflow slot otherwise. Only this format is read (not the old one that
starts with an int32's size byte).
"""

from __future__ import annotations

import os
import struct
from pathlib import Path

import numpy as np

from asrdist.errors import AsrdistError

F32 = np.float32
NEG_INF = float("-inf")
Ngram = tuple[int, ...]
MAGIC = b"\0B<ConstArpaLm> "


class _Reader:
    def __init__(self, path: Path, data: bytes) -> None:
        self.path, self.data, self.pos = path, data, 0

    def token(self, expected: str) -> None:
        want = expected.encode() + b" "
        if self.data[self.pos:self.pos + len(want)] != want:
            raise AsrdistError(f"{self.path}: not a Kaldi G.carpa (expected {expected} at byte "
                               f"{self.pos})")
        self.pos += len(want)

    def basic(self, fmt: str) -> int:
        size = struct.calcsize(fmt)
        if self.pos + 1 + size > len(self.data) or self.data[self.pos] != size:
            raise AsrdistError(f"{self.path}: truncated or corrupt G.carpa at byte {self.pos}")
        (value,) = struct.unpack_from(fmt, self.data, self.pos + 1)
        self.pos += 1 + size
        return value

    def array(self, dtype: str, count: int) -> np.ndarray:
        size = np.dtype(dtype).itemsize * count
        if count < 0 or self.pos + size > len(self.data):
            raise AsrdistError(f"{self.path}: truncated G.carpa")
        out = np.frombuffer(self.data, dtype=dtype, count=count, offset=self.pos)
        self.pos += size
        return out


class CarpaLM:
    """A G.carpa: the same lookups as :class:`asrdist.decode.arpa.ArpaLM` (order, bos, eos,
    unk, :meth:`logprob`, :meth:`history_exists`), on Kaldi's own arrays."""

    def __init__(self, path: str | os.PathLike) -> None:
        path = Path(path)
        try:
            data = path.read_bytes()
        except OSError as e:
            raise AsrdistError(f"{path}: cannot read the G.carpa ({e.strerror})") from e
        if not data.startswith(MAGIC):
            raise AsrdistError(f"{path}: not a Kaldi G.carpa in its current binary format "
                               "(arpa-to-const-arpa's output)")
        r = _Reader(path, data)
        r.pos = 2
        r.token("<ConstArpaLm>")
        r.token("<LmInfo>")
        self.bos, self.eos, unk, self.order = (r.basic("<i") for _ in range(4))
        self.unk = None if unk == -1 else unk
        r.token("</LmInfo>")
        r.token("<LmStates>")
        self.mem = r.array("<i4", r.basic("<q"))
        self.memf = self.mem.view("<f4")
        r.token("</LmStates>")
        r.token("<LmUnigram>")
        self.num_words = r.basic("<i")
        self.unigram = r.array("<i8", self.num_words) - 1  # -1: no unigram
        r.token("</LmUnigram>")
        r.token("<LmOverflow>")
        self.overflow = r.array("<i8", r.basic("<i")) - 1
        r.token("</LmOverflow>")
        r.token("</ConstArpaLm>")
        if self.order < 1 or not 0 < self.bos < self.num_words or not 0 < self.eos < \
                self.num_words:
            raise AsrdistError(f"{path}: corrupt G.carpa (order {self.order}, <s> {self.bos}, "
                               f"</s> {self.eos}, {self.num_words} words)")

    def _state(self, word: int) -> int:
        return int(self.unigram[word]) if 0 <= word < self.num_words else -1

    def _child(self, parent: int, word: int) -> tuple[int, float] | None:
        """GetChildInfo + DecodeChildInfo: (child state or -1 for a leaf, its logprob)."""
        n = int(self.mem[parent + 2])
        words = self.mem[parent + 3:parent + 3 + 2 * n:2]
        i = int(np.searchsorted(words, word))
        if i == n or words[i] != word:
            return None
        info = int(self.mem[parent + 4 + 2 * i])
        if info % 2 == 0:
            return -1, float(np.int32(info).view(F32))
        offset = int(info / 2)  # C's division, toward zero
        child = parent + offset if offset > 0 else int(self.overflow[-offset])
        return child, float(self.memf[child])

    def _lm_state(self, seq: Ngram) -> int:
        """GetLmState: the state of ``seq``, -1 when it has none."""
        state = self._state(seq[0])
        for word in seq[1:]:
            if state < 0:
                return -1
            found = self._child(state, word)
            state = found[0] if found is not None else -1
        return state

    def logprob(self, word: int, hist: Ngram) -> float:
        """ConstArpaLm::GetNgramLogprob (a float32 value; -inf when it cannot score)."""
        hist = hist[len(hist) - self.order + 1:] if len(hist) >= self.order else hist
        if self.unk is not None:
            word = word if self._state(word) >= 0 else self.unk
            hist = tuple(w if self._state(w) >= 0 else self.unk for w in hist)
        return self._logprob(word, hist)

    def _logprob(self, word: int, hist: Ngram) -> float:
        if not hist:
            state = self._state(word)
            return float(self.memf[state]) if state >= 0 else NEG_INF
        backoff = F32(0.0)
        state = self._lm_state(hist)
        if state >= 0:
            found = self._child(state, word)
            if found is not None:
                return found[1]
            backoff = self.memf[state + 1]
        return float(backoff + F32(self._logprob(word, hist[1:])))

    def history_exists(self, hist: Ngram) -> bool:
        """ConstArpaLm::HistoryStateExists on raw word ids."""
        if not hist:
            return True
        state = self._lm_state(hist)
        return state >= 0 and int(self.mem[state + 2]) > 0
