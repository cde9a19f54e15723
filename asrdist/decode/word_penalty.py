"""One decoding graph for every word insertion penalty of a sweep, one penalty at a time.

Kaldi's ``lattice-add-penalty`` adds the penalty to the cost of every word; asrdist searches
the graph once per penalty, with the penalty on every arc that outputs a word. Composing HCLG
with a one-state word loop did that, at the price of a full HCLG copy per penalty in every
decode job. Here a job keeps the graph as an OpenFst vector file in its scratch folder, with
the byte offsets and original costs of its word arcs: switching to a penalty rewrites those
costs in the file (original + penalty, added in float32 as the composition added them) and
reads the graph back, so a job holds one graph whatever the number of penalties. Every path
costs what it cost in the composed graph, bit for bit; only the state numbering differs, which
matters only to which of two exactly equal-cost paths the search keeps.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from pathlib import Path

import kaldi_hmm_gmm  # noqa: F401  (before kaldifst, or the process hangs)
import kaldifst
import numpy as np

from asrdist.decode.graph import read_fst
from asrdist.errors import AsrdistError

_CHUNK = 32 << 20  # bytes of the graph file read, patched and written back at a time
_STATE_HEAD = 12  # a vector FST file's state: final cost (float32), number of arcs (int64)
_ARC = 16  # then its arcs: ilabel, olabel (int32), cost (float32), next state (int32)


class PenaltyGraph:
    """HCLG with a word insertion penalty that can be changed, one copy in memory at a time."""

    def __init__(self, hclg: str | os.PathLike, word_ids: Sequence[int],
                 scratch: str | os.PathLike):
        fst = read_fst(hclg)
        self.path = Path(scratch) / "HCLG.penalised.fst"
        if not fst.write(str(self.path)):
            raise AsrdistError(f"{self.path}: cannot write the graph")
        narcs = np.fromiter((fst.num_arcs(s) for s in range(fst.num_states)), dtype=np.int64,
                            count=fst.num_states)
        del fst
        blocks = _STATE_HEAD + _ARC * narcs
        ends = np.cumsum(blocks)
        header = self.path.stat().st_size - (int(ends[-1]) if len(ends) else 0)
        starts = header + ends - blocks
        offsets, costs, labels = [], [], []
        for lo, hi in _state_chunks(starts + blocks):
            base = int(starts[lo])
            words = self._read(base, int(starts[hi - 1] + blocks[hi - 1]) - base)
            first_arc = np.repeat(starts[lo:hi] + _STATE_HEAD - base, narcs[lo:hi])
            k = np.arange(len(first_arc)) - np.repeat(np.cumsum(narcs[lo:hi]) - narcs[lo:hi],
                                                      narcs[lo:hi])
            arc = first_arc + _ARC * k  # byte offsets of the arcs, from base
            olabel = words[(arc + 4) // 4]
            word = olabel != 0
            labels.append(olabel[word])
            offsets.append(arc[word] + 8 + base)
            costs.append(words[(arc[word] + 8) // 4].view("<f4"))
        self.offsets = np.concatenate(offsets) if offsets else np.zeros(0, np.int64)
        self.costs = np.concatenate(costs) if costs else np.zeros(0, "<f4")
        found = np.concatenate(labels) if labels else np.zeros(0, np.int32)
        strange = np.setdiff1d(found, np.asarray(list(word_ids), dtype=np.int32))
        if len(strange):
            raise AsrdistError(f"{hclg}: an arc outputs label {strange[0]}, which is not a word "
                               "of words.txt (#0, <s>, </s>?): no penalty can be put on it")
        self.penalty = 0.0

    def _read(self, start: int, size: int) -> np.ndarray:
        """``size`` bytes of the file from ``start`` as int32 words (``start`` is 4-aligned
        with every field of the file's states: they all follow the header in 4-byte steps)."""
        with open(self.path, "rb") as f:
            f.seek(start)
            data = f.read(size)
        return np.frombuffer(data, dtype="<i4", count=size // 4).copy()

    def load(self, penalty: float) -> kaldifst.StdVectorFst:
        """The graph with ``penalty`` on every word arc (drop the previous one first: this
        reads a new copy)."""
        if penalty != self.penalty:
            new = (self.costs + np.float32(penalty)).astype("<f4")
            with open(self.path, "r+b") as f:
                for lo, hi in _offset_chunks(self.offsets):
                    start = int(self.offsets[lo])
                    f.seek(start)
                    data = bytearray(f.read(int(self.offsets[hi - 1]) + 4 - start))
                    patch = np.frombuffer(data, dtype="<f4")
                    patch[(self.offsets[lo:hi] - start) // 4] = new[lo:hi]
                    f.seek(start)
                    f.write(data)
            self.penalty = penalty
        fst = kaldifst.StdVectorFst.read(str(self.path))
        if fst is None:
            raise AsrdistError(f"{self.path}: cannot read the graph back")
        return fst


def _state_chunks(ends: np.ndarray) -> Iterator[tuple[int, int]]:
    """[lo, hi) ranges of states whose bytes (ending at ``ends``) span about _CHUNK each."""
    lo = 0
    while lo < len(ends):
        base = int(ends[lo - 1]) if lo else 0
        hi = max(lo + 1, int(np.searchsorted(ends, base + _CHUNK, side="right")))
        yield lo, hi
        lo = hi


def _offset_chunks(offsets: np.ndarray) -> Iterator[tuple[int, int]]:
    """[lo, hi) ranges of the sorted ``offsets`` that lie within _CHUNK bytes of each other."""
    lo = 0
    while lo < len(offsets):
        hi = max(lo + 1, int(np.searchsorted(offsets, offsets[lo] + _CHUNK - 4, side="right")))
        yield lo, hi
        lo = hi
