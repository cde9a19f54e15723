"""LM rescoring of compact lattices, as Kaldi's steps/lmrescore_const_arpa.sh does it:

    lattice-lmrescore --lm-scale=-1.0 "fstproject --project_output=true old/G.fst |"
      | lattice-lmrescore-const-arpa --lm-scale=1.0 new/G.carpa

:func:`remove_lm` is lattice-lmrescore: the lattice (transition-ids in, words out, as Kaldi
reads a compact lattice into a Lattice; each arc's transition-ids kept as one string,
:func:`to_string_lattice`) has its graph costs negated (1/lm_scale), is composed with G (its
output labels; OpenFst's composition with the sequence filter, which decides the order of the
epsilon moves on either side and so how the float32 costs are summed), inverted, determinized
(:mod:`asrdist.decode.lattice.determinize`: the best G path per word sequence) and negated
again (lm_scale): every word sequence loses its best G path's cost. :func:`add_lm` is
lattice-lmrescore-const-arpa: the compact lattice composed breadth first with the new LM (an
ARPA file, or Kaldi's G.carpa) as a deterministic on-demand FST (:class:`ArpaFst`:
ConstArpaLmDeterministicFst), then converted, inverted and determinized as above. Only the
scales lmrescore_const_arpa.sh uses, -1 and 1, are implemented. A lattice that no LM path
accepts gives None (both binaries drop it with a warning). The acoustic costs pass through
untouched. Checked against Kaldi's binaries: the same lattices, float32 costs to the bit
(tests/decode/kaldi_expected, bench.lmrescore_cost).
"""

from __future__ import annotations

import gzip
import logging
import os
import struct
from collections import deque
from collections.abc import Iterator
from pathlib import Path
from typing import Protocol

import numpy as np

from asrdist.decode.graph import fst_chunks, read_header
from asrdist.decode.lattice import (
    ONE,
    ZERO,
    CompactLattice,
    Lattice,
    Weight,
    connect,
    connect_compact,
    determinize_lattice,
    is_zero,
    scale_lattice,
    times,
)
from asrdist.decode.lattice_io import iter_lattices_binary, iter_lattices_text
from asrdist.errors import AsrdistError

log = logging.getLogger(__name__)

F32 = np.float32
_FST_MAGIC = struct.pack("<i", 2125659606)


# ---- the old LM: G.fst, output-projected ---------------------------------------------------


class BackoffFst:
    """``fstproject --project_output=true G.fst`` as arrays: per state its arcs (label, cost,
    next state) in the file's order and its final cost; backoff arcs (#0:<eps>) become
    epsilons. Per-state lookups are built when a state is first used."""

    def __init__(self, path: str | os.PathLike) -> None:
        finals, counts, labels, costs, nexts = [], [], [], [], []
        for final, narcs, arcs in fst_chunks(path):
            finals.append(final)
            counts.append(narcs)
            labels.append(arcs["o"])
            costs.append(arcs["w"])
            nexts.append(arcs["n"])
        self.start = read_header(path).start
        self.final = np.concatenate(finals) if finals else np.zeros(0, F32)
        narcs = np.concatenate(counts) if counts else np.zeros(0, np.int64)
        self.first = np.concatenate([[0], np.cumsum(narcs)])
        self.labels = np.concatenate(labels) if labels else np.zeros(0, np.int32)
        self.costs = np.concatenate(costs) if costs else np.zeros(0, F32)
        self.nexts = np.concatenate(nexts) if nexts else np.zeros(0, np.int32)
        self._states: dict[int, tuple[list, dict[int, list]]] = {}
        if self.start < 0 or self.start >= len(self.final):
            raise AsrdistError(f"{path}: G has no start state")

    def arcs(self, s: int) -> tuple[list[tuple[F32, int]], dict[int, list[tuple[F32, int]]]]:
        """State ``s``'s epsilon arcs and its word arcs by word, each (cost, next state)."""
        found = self._states.get(s)
        if found is None:
            lo, hi = int(self.first[s]), int(self.first[s + 1])
            eps: list[tuple[F32, int]] = []
            by_word: dict[int, list[tuple[F32, int]]] = {}
            for label, c, n in zip(self.labels[lo:hi].tolist(), self.costs[lo:hi],
                                   self.nexts[lo:hi].tolist(), strict=True):
                (eps if label == 0 else by_word.setdefault(label, [])).append((c, n))
            found = self._states[s] = (eps, by_word)
        return found


# ---- lattice-lmrescore ----------------------------------------------------------------------


def to_string_lattice(clat: CompactLattice) -> Lattice:
    """ConvertLattice(CompactLattice -> Lattice, invert=true) with each arc's chain of
    transition-ids kept as one arc whose input label is the whole string (a tuple): words out.

    Kaldi spells a string on a chain of new states, the word and the weight on the first arc;
    the chain's inner states have one output-epsilon arc and are not final, so composition
    moves through them without a G move and determinization passes them adding One: keeping the
    string on one arc composes and determinizes to the same lattice, costs included, with a
    state per compact state instead of one per transition-id. A final string keeps its own arc
    (output epsilon, the final weight) to a new final state, as Kaldi's chain: the state it
    leaves has an output-epsilon arc and is not final, which the sequence filter looks at."""
    n = clat.num_states
    lat = Lattice([[] for _ in range(n)], [ZERO] * n, clat.start if n else 0)
    for s in range(n):
        final = clat.final[s]
        if final is not None:
            weight, string = final
            if string:
                end = lat.add_state()
                lat.arcs[s].append((string, 0, weight, end))
                lat.final[end] = ONE
            else:
                lat.final[s] = weight
        for word, weight, string, nxt in clat.arcs[s]:
            lat.arcs[s].append((string, word, weight, nxt))
    return lat


def _scale_graph(w: Weight, scale: float) -> Weight:
    """ScaleTupleWeight by [[scale, 0], [0, 1]] (double arithmetic, float32 result; Zero
    stays Zero)."""
    if np.isinf(w[0]):
        return ZERO
    return (F32(scale * float(w[0]) + 0.0 * float(w[1])),
            F32(0.0 * float(w[0]) + 1.0 * float(w[1])))


def _compose_g(lat: Lattice, g: BackoffFst) -> Lattice:
    """ComposeFst(lat, G) with OpenFst's SequenceComposeFilter, states numbered breadth first,
    then connected. The filter (state 0 or 1): G's epsilon moves are blocked at a lattice state
    whose arcs are all output-epsilon and that is not final; after one of them (state 1 where
    the lattice state has output-epsilon arcs) the lattice's output-epsilon moves are blocked
    until a word is matched; epsilon meeting epsilon is never taken."""
    out = Lattice()
    index: dict[tuple[int, int, int], int] = {}
    queue: deque[tuple[int, int, int]] = deque()

    def state(key: tuple[int, int, int]) -> int:
        found = index.get(key)
        if found is None:
            found = index[key] = out.add_state()
            queue.append(key)
        return found

    state((lat.start, g.start, 0))
    while queue:
        s1, s2, fs = key = queue.popleft()
        s = index[key]
        arcs1 = lat.arcs[s1]
        eps1 = sum(1 for a in arcs1 if a[1] == 0)
        final1 = lat.final[s1]
        g_eps, g_words = g.arcs(s2)
        if not is_zero(final1) and not np.isinf(g.final[s2]):
            out.final[s] = times(final1, (F32(g.final[s2]), F32(0.0)))
        if g_eps and not (eps1 == len(arcs1) and is_zero(final1)):
            after = 0 if eps1 == 0 else 1
            for c, n2 in g_eps:  # the lattice stays, G backs off
                out.arcs[s].append(((), 0, times(ONE, (c, F32(0.0))), state((s1, n2, after))))
        for ilabel, olabel, w, n1 in arcs1:
            if olabel == 0:
                if fs == 0:  # G stays
                    out.arcs[s].append((ilabel, 0, times(w, ONE), state((n1, s2, 0))))
                continue
            for c, n2 in g_words.get(olabel, ()):
                out.arcs[s].append((ilabel, olabel, times(w, (c, F32(0.0))),
                                    state((n1, n2, 0))))
    return connect(out)


def _invert(lat: Lattice) -> Lattice:
    return Lattice([[(a[1], a[0], a[2], a[3]) for a in arcs] for arcs in lat.arcs],
                   lat.final, lat.start)


def remove_lm(clat: CompactLattice, g: BackoffFst) -> CompactLattice | None:
    """lattice-lmrescore --lm-scale=-1.0 with G: None when the result is empty."""
    lat = to_string_lattice(clat)
    lat.arcs = [[(a[0], a[1], _scale_graph(a[2], -1.0), a[3]) for a in arcs]
                for arcs in lat.arcs]
    lat.final = [_scale_graph(f, -1.0) for f in lat.final]
    for arcs in lat.arcs:
        arcs.sort(key=lambda a: a[1])  # ArcSort by olabel (distinct labels: any order)
    det = determinize_lattice(_invert(_compose_g(lat, g)))
    return scale_lattice(det, -1.0, 1.0) if det.num_states else None


# ---- lattice-lmrescore-const-arpa -----------------------------------------------------------


class NgramLM(Protocol):
    """What ConstArpaLmDeterministicFst asks of its LM: :class:`asrdist.decode.arpa.ArpaLM`
    (an ARPA file) or :class:`asrdist.decode.carpa.CarpaLM` (Kaldi's G.carpa)."""

    order: int
    bos: int
    eos: int

    def logprob(self, word: int, hist: tuple[int, ...]) -> float: ...

    def history_exists(self, hist: tuple[int, ...]) -> bool: ...


class ArpaFst:
    """ConstArpaLmDeterministicFst: a state per word history (the start one <s>); the arc for
    a word costs -ln p(word | history) and goes to the history plus the word, cut to order-1
    words and then to its longest suffix that is an LM state; no arc where the LM gives -inf."""

    def __init__(self, lm: NgramLM) -> None:
        self.lm = lm
        self.histories: list[tuple[int, ...]] = [(lm.bos,)]
        self.index = {(lm.bos,): 0}

    def final(self, s: int) -> F32:
        return F32(-self.lm.logprob(self.lm.eos, self.histories[s]))

    def arc(self, s: int, word: int) -> tuple[F32, int] | None:
        hist = self.histories[s]
        logprob = self.lm.logprob(word, hist)
        if logprob == -np.inf:
            return None
        nxt = (*hist, word)
        nxt = nxt[max(0, len(nxt) - self.lm.order + 1):]
        while not self.lm.history_exists(nxt):
            nxt = nxt[1:]
        found = self.index.get(nxt)
        if found is None:
            found = self.index[nxt] = len(self.histories)
            self.histories.append(nxt)
        return F32(-logprob), found


def _compose_arpa(clat: CompactLattice, lm: ArpaFst) -> CompactLattice:
    """ComposeCompactLatticeDeterministic: breadth first over (lattice state, LM state), the
    lattice's arcs sorted by word; the LM cost added to the graph cost in float32."""
    out = CompactLattice([[]], [None], 0)
    index = {(clat.start, 0): 0}
    queue = deque([(clat.start, 0)])
    while queue:
        s1, s2 = key = queue.popleft()
        s = index[key]
        final = clat.final[s1]
        if final is not None and not np.isinf(final[0][0]):
            lm_final = lm.final(s2)
            if not np.isinf(lm_final):
                out.final[s] = ((final[0][0] + lm_final, final[0][1]), final[1])
        for word, w, string, n1 in sorted(clat.arcs[s1], key=lambda a: a[0]):
            if word == 0:
                n2, weight = s2, w
            else:
                found = lm.arc(s2, word)
                if found is None:
                    continue
                c, n2 = found
                weight = (w[0] + c, w[1])
            nxt = index.get((n1, n2))
            if nxt is None:
                nxt = index[(n1, n2)] = len(out.arcs)
                out.arcs.append([])
                out.final.append(None)
                queue.append((n1, n2))
            out.arcs[s].append((word, weight, string, nxt))
    return connect_compact(out)


def add_lm(clat: CompactLattice, lm: NgramLM) -> CompactLattice | None:
    """lattice-lmrescore-const-arpa --lm-scale=1.0 (its scalings by 1 and 1/1 change
    nothing): None when the result is empty."""
    if not clat.num_states:
        return None
    composed = _compose_arpa(clat, ArpaFst(lm))
    if not composed.num_states:
        return None
    det = determinize_lattice(_invert(to_string_lattice(composed)))
    return det if det.num_states else None


def rescore(clat: CompactLattice, g: BackoffFst, lm: NgramLM) -> CompactLattice | None:
    """The old LM's costs out (scale -1), the new one's in (scale 1); None when empty."""
    removed = remove_lm(clat, g)
    return None if removed is None else add_lm(removed, lm)


# ---- archives -------------------------------------------------------------------------------


def iter_lattice_archive(path: str | os.PathLike) -> Iterator[tuple[str, CompactLattice]]:
    """A ``lat.N.gz`` (or plain) archive of compact lattices, binary or text, one (key,
    lattice) at a time, so that a job holds one lattice, not a test set's (its bytes are read
    whole: a few MB an hour of speech)."""
    path = Path(path)
    try:
        data = gzip.decompress(path.read_bytes()) if path.name.endswith(".gz") \
            else path.read_bytes()
    except (OSError, EOFError, gzip.BadGzipFile) as e:
        raise AsrdistError(f"{path}: cannot read the lattices ({e})") from e
    space = data.find(b" ")
    try:
        if space >= 0 and data[space + 1:space + 5] == _FST_MAGIC:
            yield from iter_lattices_binary(data)
        else:
            yield from iter_lattices_text(data.decode())
    except (ValueError, IndexError, struct.error, UnicodeDecodeError, AsrdistError) as e:
        raise AsrdistError(f"{path}: not a Kaldi lattice archive ({e})") from e


def read_lattice_archive(path: str | os.PathLike) -> dict[str, CompactLattice]:
    """:func:`iter_lattice_archive`'s lattices, by key (all in memory)."""
    return dict(iter_lattice_archive(path))
