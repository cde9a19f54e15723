"""Lattices as Kaldi's latgen-faster-mapped makes them, and the sweep on them.

No packaged library determinizes a lattice as Kaldi does (kaldifst has OpenFst's
determinization, not Kaldi's lattice determinization; kaldi-hmm-gmm's lattice decoder returns
only the best path), so :func:`determinize_lattice_phone_pruned` ports Kaldi's
``DeterminizeLatticePhonePrunedWrapper`` (lat/determinize-lattice-pruned.cc) step by step:
invert, top-sort and arc-sort the raw lattice; insert phone labels at phone starts; a first
pruned determinization on words + phones; phones deleted; a second one on words, giving a
compact lattice; connect. Weights are float32 pairs (graph, acoustic) computed in float32 as
Kaldi's ``LatticeWeight`` is, the task queue is libstdc++'s binary heap, so that ties resolve
as Kaldi's do and the output states come out numbered as Kaldi numbers them.

The raw state-level lattice comes from our own compiled search (asrdist/decode/
_lattice_search.cpp, in :mod:`asrdist.decode._lattice_native`): LatticeFasterDecoder's
algorithm with its options (--beam, --max-active, --min-active, --lattice-beam; pruning every
25 frames and at the end; costs kept relative to per-frame offsets, as Kaldi rounds them), over
HCLG's const file mapped in memory (:func:`asrdist.decode.graph.search_graph`). Checked against
latgen-faster-mapped (tests/decode/kaldi_expected): the same states, arcs, words and
transition-ids; a few costs one float32 ulp apart. Where the module was not built (a checkout
used through PYTHONPATH), kaldi-decoder's ``LatticeSimpleDecoder`` searches instead (no
max-active; other tokens kept at the same beam), its acoustic costs rounded as
LatticeFasterDecoder's cost offsets round them (:func:`_with_cost_offsets`), and the Python
determinizer follows; :class:`LatticeDecoder` says once that decoding is then slower.
Not ported: the determinizer's memory limit (--max-mem, 50 MB: past it Kaldi prunes harder and
retries). kaldi-decoder hangs a process that imported kaldilm first (which
:mod:`asrdist.decode.graph` does), so it is imported only inside :class:`LatticeDecoder`.

The same pipeline from the raw lattice's bytes on (read, connect, cost offsets, determinization,
acoustic scale) is compiled in :mod:`asrdist.decode._lattice_native` (_lattice_native.cpp,
transcribed from the functions here, to the same bits), built by ``pip install -e .``; issue 32
measured the Python too slow for decoding within 1.5x of Kaldi.

The sweep (:func:`best_path`) is what ``lattice-scale --inv-acoustic-scale=LMWT |
lattice-add-penalty --word-ins-penalty=WIP | lattice-best-path`` gives for one point (and
lattice-1best's transition-ids, for the word times); :func:`best_paths` reads many points in
one call to the compiled module (``best_paths`` in _lattice_native.cpp, to the same paths,
ties included), the Python per point where it was not built.
"""

from __future__ import annotations

import contextlib
import gc
import heapq
import itertools
import logging
import math
import operator
import os
import struct
import sys
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

import kaldi_hmm_gmm  # noqa: F401  (first: kaldifst or kaldi_decoder before it hang)
import numpy as np

from asrdist.errors import AsrdistError
from asrdist.options import POSITIVE, Options, at_least, option

try:
    from asrdist.decode import _lattice_native
except ImportError:  # not built: a checkout used through PYTHONPATH
    _lattice_native = None
# what this tree calls in the module: a build of older sources lacks some (a checkout updated
# without pip install -e .), and is refused in one line rather than half used
_NATIVE_CALLS = ("Search", "compact_lattice", "best_paths")


def native_search() -> str:
    """Which search makes the lattices here: the compiled one, or kaldi-decoder's (no
    --max-active) where the module was not built."""
    return "asrdist" if _lattice_native is not None else "kaldi-decoder"


def _check_native_build() -> None:
    """One line saying to rebuild, if the compiled module predates this tree's sources."""
    missing = [c for c in _NATIVE_CALLS if not hasattr(_lattice_native, c)]
    if missing:
        raise AsrdistError(f"asrdist.decode._lattice_native was built from older sources (no "
                           f"{', '.join(missing)}): rebuild it (pip install -e .)")

if TYPE_CHECKING:
    import kaldifst

    from asrdist.kaldi.transition_model import TransitionInfo

log = logging.getLogger(__name__)

F32 = np.float32
Weight = tuple[np.float32, np.float32]  # (graph cost, acoustic cost), Kaldi's LatticeWeight
ONE: Weight = (F32(0.0), F32(0.0))
ZERO: Weight = (F32(np.inf), F32(np.inf))
DELTA = F32(1.0 / 1024)  # fst::kDelta, DeterminizeLatticePhonePrunedOptions' delta


# ---- Kaldi's LatticeWeight arithmetic (fstext/lattice-weight.h) ----------------------------


def _is_zero(w: Weight) -> bool:
    return bool(w[0] == ZERO[0] and w[1] == ZERO[1])


def _times(a: Weight, b: Weight) -> Weight:
    return (a[0] + b[0], a[1] + b[1])


def _compare(a: Weight, b: Weight) -> int:
    """fst::Compare: 1 when a is better (lower cost), -1 when worse, ties on the graph cost."""
    fa, fb = a[0] + a[1], b[0] + b[1]
    if fa < fb:
        return 1
    if fa > fb:
        return -1
    if a[0] < b[0]:
        return 1
    if a[0] > b[0]:
        return -1
    return 0


def _plus(a: Weight, b: Weight) -> Weight:
    return a if _compare(a, b) >= 0 else b


def _divide(a: Weight, b: Weight) -> Weight:
    v1, v2 = a[0] - b[0], a[1] - b[1]
    if math.isinf(v1) or math.isinf(v2):
        return ZERO
    return (v1, v2)


def cost(w: Weight) -> float:
    """ConvertToCost: the total cost, summed in double."""
    return float(w[0]) + float(w[1])


def _approx_equal(a: Weight, b: Weight) -> bool:
    if a[0] == b[0] and a[1] == b[1]:
        return True
    return bool(abs((a[0] + a[1]) - (b[0] + b[1])) <= DELTA)


def _compare_with_strings(aw: Weight, astr: tuple[int, ...], bw: Weight,
                          bstr: tuple[int, ...]) -> int:
    """The determinizer's Compare: weights first, then the shorter string, then the smaller."""
    c = _compare(aw, bw)
    if c or astr == bstr:
        return c
    if len(astr) != len(bstr):
        return -1 if len(astr) > len(bstr) else 1
    return -1 if astr < bstr else 1


# ---- lattices --------------------------------------------------------------------------------

Arc = tuple[int, int, Weight, int]  # ilabel, olabel, weight, next state


@dataclass
class Lattice:
    """Kaldi's state-level Lattice (transducer; start state ``start``)."""

    arcs: list[list[Arc]] = field(default_factory=list)
    final: list[Weight] = field(default_factory=list)
    start: int = 0

    def add_state(self) -> int:
        self.arcs.append([])
        self.final.append(ZERO)
        return len(self.arcs) - 1


CompactArc = tuple[int, Weight, tuple[int, ...], int]  # word, weight, transition-ids, next


@dataclass
class CompactLattice:
    """Kaldi's CompactLattice: a word acceptor whose weights carry the transition-id strings.

    ``final[s]`` is None for a non-final state, else (weight, transition-ids).
    """

    arcs: list[list[CompactArc]] = field(default_factory=list)
    final: list[tuple[Weight, tuple[int, ...]] | None] = field(default_factory=list)
    start: int = 0

    @property
    def num_states(self) -> int:
        return len(self.arcs)


def _connected(succ: list[list[int]], final: list[bool], start: int) -> list[int]:
    """States both reachable from ``start`` and reaching a final state, in order."""
    n = len(succ)
    acc = [False] * n
    acc[start] = True
    stack = [start]
    while stack:
        for t in succ[stack.pop()]:
            if not acc[t]:
                acc[t] = True
                stack.append(t)
    preds: list[list[int]] = [[] for _ in range(n)]
    for s, ts in enumerate(succ):
        for t in ts:
            preds[t].append(s)
    coacc = list(final)
    stack = [s for s in range(n) if final[s]]
    while stack:
        for p in preds[stack.pop()]:
            if not coacc[p]:
                coacc[p] = True
                stack.append(p)
    return [s for s in range(n) if acc[s] and coacc[s]] if coacc[start] else []


def connect(lat: Lattice) -> Lattice:
    """fst::Connect: drop states not on a successful path, keeping the others' order."""
    if not lat.arcs:
        return lat
    keep = _connected([[a[3] for a in arcs] for arcs in lat.arcs],
                      [not _is_zero(f) for f in lat.final], lat.start)
    new = {s: i for i, s in enumerate(keep)}
    return Lattice([[(*a[:3], new[a[3]]) for a in lat.arcs[s] if a[3] in new] for s in keep],
                   [lat.final[s] for s in keep], new.get(lat.start, 0))


def top_order(succ: list[list[int]]) -> list[int]:
    """A topological order of the states (a lattice is acyclic)."""
    n = len(succ)
    indeg = [0] * n
    for ts in succ:
        for t in ts:
            indeg[t] += 1
    order, stack = [], [s for s in range(n - 1, -1, -1) if indeg[s] == 0]
    while stack:
        s = stack.pop()
        order.append(s)
        for t in reversed(succ[s]):
            indeg[t] -= 1
            if indeg[t] == 0:
                stack.append(t)
    if len(order) != n:
        raise AsrdistError("the lattice has a cycle (empty words or epsilon cycles in the LM?)")
    return order


def top_sort(lat: Lattice) -> Lattice:
    """States renumbered in a topological order."""
    order = top_order([[a[3] for a in arcs] for arcs in lat.arcs])
    new = [0] * len(order)
    for i, s in enumerate(order):
        new[s] = i
    return Lattice([[(a[0], a[1], a[2], new[a[3]]) for a in lat.arcs[s]] for s in order],
                   [lat.final[s] for s in order], new[lat.start])


# ---- Kaldi's pruned lattice determinization --------------------------------------------------

Element = tuple[int, tuple[int, ...], Weight]  # input state, string, weight
_state_of = operator.itemgetter(0)  # an element's input state; an arc's input label


def normalize_subset(subset: list[Element]) -> tuple[list[Element], Weight, tuple[int, ...]]:
    """Kaldi's NormalizeSubset (both determinizers'): the subset's total weight and the
    longest string its elements share, divided out of each element."""
    weight, prefix = subset[0][2], subset[0][1]
    for e in subset[1:]:
        weight = _plus(weight, e[2])
        n = 0
        for a, b in zip(prefix, e[1], strict=False):
            if a != b:
                break
            n += 1
        prefix = prefix[:n]
    k = len(prefix)
    return [(e[0], e[1][k:], _divide(e[2], weight)) for e in subset], weight, prefix


class _TaskQueue:
    """std::priority_queue<Task*> with TaskCompare (lowest cost on top), libstdc++'s heap, so
    that tasks of equal cost are taken in Kaldi's order."""

    def __init__(self) -> None:
        self.heap: list[tuple[float, int, int, list[Element]]] = []

    def push(self, task: tuple[float, int, int, list[Element]]) -> None:
        h = self.heap
        h.append(task)
        self._push_up(len(h) - 1, 0, task)

    def _push_up(self, hole: int, top: int, value: tuple) -> None:
        h = self.heap
        parent = (hole - 1) // 2
        while hole > top and h[parent][0] > value[0]:
            h[hole] = h[parent]
            hole = parent
            parent = (hole - 1) // 2
        h[hole] = value

    def pop(self) -> tuple[float, int, int, list[Element]]:
        h = self.heap
        top = h[0]
        last = h.pop()
        n = len(h)
        if n:
            hole, second = 0, 0
            while second < (n - 1) // 2:
                second = 2 * (second + 1)
                if h[second][0] > h[second - 1][0]:
                    second -= 1
                h[hole] = h[second]
                hole = second
            if n % 2 == 0 and second == (n - 2) // 2:
                second = 2 * (second + 1)
                h[hole] = h[second - 1]
                hole = second - 1
            self._push_up(hole, 0, last)
        return top

    def __bool__(self) -> bool:
        return bool(self.heap)


class _Determinizer:
    """LatticeDeterminizerPruned (input top-sorted). Its memory limit is not enforced, so the
    retry with a smaller beam that follows it in Kaldi never happens here."""

    def __init__(self, lat: Lattice, beam: float):
        self.lat = lat
        n = len(lat.arcs)
        back = [0.0] * n
        inf = ZERO[0]
        # per state: its input-epsilon arcs (olabel, weight, next) and its labelled arcs, both
        # without the arcs of weight Zero, which every step of the algorithm skips
        self.eps: list[list[tuple[int, Weight, int]]] = [[] for _ in range(n)]
        self.labelled: list[list[Arc]] = [[] for _ in range(n)]
        self.emitting = [False] * n
        finals, all_arcs, eps, labelled = lat.final, lat.arcs, self.eps, self.labelled
        for s in range(n - 1, -1, -1):
            f = finals[s]
            c = float(f[0]) + float(f[1])
            emitting = not (f[0] == inf and f[1] == inf)
            for arc in all_arcs[s]:
                w = arc[2]
                wc = float(w[0]) + float(w[1])  # inf whenever w is Zero
                if wc + back[arc[3]] < c:
                    c = wc + back[arc[3]]
                if wc == inf and w[0] == inf and w[1] == inf:
                    continue
                if arc[0]:
                    labelled[s].append(arc)
                    emitting = True
                else:
                    eps[s].append((arc[1], w, arc[3]))
            back[s] = c
            self.emitting[s] = emitting
        self.back = back
        self.cutoff = back[lat.start] + beam
        # per output state: minimal subset, forward cost, arcs (ilabel, string, next|None, w)
        self.states: list[tuple[list[Element], float]] = []
        self.out_arcs: list[list[tuple[int, tuple[int, ...], int | None, Weight]]] = []
        self.minimal_hash: dict[tuple, list[tuple[list[Weight], int]]] = {}
        self.initial_hash: dict[tuple, list[tuple[list[Weight], Element]]] = {}
        self.queue = _TaskQueue()

    @staticmethod
    def _lookup(table: dict, subset: list[Element]):
        for weights, value in table.get(tuple((e[0], e[1]) for e in subset), ()):
            if all(_approx_equal(w, e[2]) for w, e in zip(weights, subset, strict=True)):
                return value
        return None

    @staticmethod
    def _store(table: dict, subset: list[Element], value) -> None:
        key = tuple((e[0], e[1]) for e in subset)
        table.setdefault(key, []).append(([e[2] for e in subset], value))

    def run(self) -> None:
        lat = self.lat
        subset = self._minimal(self._closure([(lat.start, (), ONE)]))
        self._new_state(subset, 0.0)
        while self.queue:
            _, ostate, label, task_subset = self.queue.pop()
            self._process_transition(ostate, label, task_subset)

    def _closure(self, subset: list[Element]) -> list[Element]:
        """EpsilonClosure: Kaldi's queue takes the lowest state first and skips an element
        replaced since it was queued. The lattice is top-sorted, so every arc leads to a
        higher state: each state is taken once, after all its predecessors, with its final
        element; so the queue here holds each state once (none without epsilon arcs: taking
        it would do nothing) and the element is looked up when the state is taken."""
        eps = self.eps
        cur = {e[0]: e for e in subset}
        heap = [e[0] for e in subset if eps[e[0]]]
        if not heap:
            return sorted(cur.values(), key=_state_of)
        heapq.heapify(heap)
        pop, push = heapq.heappop, heapq.heappush
        while heap:
            state, string, ew = cur[pop(heap)]
            for olabel, w, nxt in eps[state]:
                weight = (ew[0] + w[0], ew[1] + w[1])
                nstring = string + (olabel,) if olabel else string
                old = cur.get(nxt)
                if old is None:
                    cur[nxt] = (nxt, nstring, weight)
                    if eps[nxt]:
                        push(heap, nxt)
                elif _compare_with_strings(weight, nstring, old[2], old[1]) == 1:
                    cur[nxt] = (nxt, nstring, weight)
        return sorted(cur.values(), key=_state_of)

    def _minimal(self, subset: list[Element]) -> list[Element]:
        return [e for e in subset if self.emitting[e[0]]]

    def _new_state(self, subset: list[Element], forward_cost: float) -> int:
        sid = len(self.states)
        self.states.append((subset, forward_cost))
        self.out_arcs.append([])
        self._store(self.minimal_hash, subset, sid)
        self._process_final(sid)
        self._process_transitions(sid)
        return sid

    def _process_final(self, sid: int) -> None:
        subset, forward_cost = self.states[sid]
        best: tuple[Weight, tuple[int, ...]] | None = None
        for state, string, weight in subset:
            w = _times(weight, self.lat.final[state])
            if not _is_zero(w) and (best is None or
                                    _compare_with_strings(w, string, best[0], best[1]) == 1):
                best = (w, string)
        if best is not None and cost(best[0]) + forward_cost <= self.cutoff:
            self.out_arcs[sid].append((0, best[1], None, best[0]))

    def _process_transitions(self, sid: int) -> None:
        subset, forward_cost = self.states[sid]
        elems = []
        labelled = self.labelled
        for state, string, weight in subset:
            for ilabel, olabel, w, nxt in labelled[state]:
                elems.append((ilabel, (nxt, string + (olabel,) if olabel else string,
                                       (weight[0] + w[0], weight[1] + w[1]))))
        elems.sort(key=lambda p: (p[0], p[1][0]))
        for label, group in itertools.groupby(elems, key=lambda p: p[0]):
            task = [e for _, e in group]
            priority = min(cost(e[2]) + self.back[e[0]] for e in task) + forward_cost
            if priority > self.cutoff:
                continue
            unique: list[Element] = []
            for e in task:  # MakeSubsetUnique: the best element per state
                if unique and unique[-1][0] == e[0]:
                    if _compare_with_strings(e[2], e[1], unique[-1][2], unique[-1][1]) == 1:
                        unique[-1] = e
                else:
                    unique.append(e)
            self.queue.push((priority, sid, label, unique))

    def _process_transition(self, ostate: int, label: int, subset: list[Element]) -> None:
        forward_cost = self.states[ostate][1]
        subset, tot_weight, common = normalize_subset(subset)
        forward_cost += cost(tot_weight)
        found = self._lookup(self.initial_hash, subset)
        if found is None:
            minimal = self._minimal(self._closure(subset))
            minimal, weight, string = normalize_subset(minimal)
            fc = forward_cost + cost(weight)
            nxt = self._lookup(self.minimal_hash, minimal)
            if nxt is None:
                nxt = self._new_state(minimal, fc)
            found = (nxt, string, weight)
            self._store(self.initial_hash, subset, found)
        nxt, next_string, next_weight = found
        self.out_arcs[ostate].append((label, common + next_string, nxt,
                                      _times(tot_weight, next_weight)))

    def output_lattice(self, first_removed: int | None = None) -> Lattice:
        """Output(MutableFst<Arc>*): strings spelled out on chains of new states; input labels
        from ``first_removed`` up (the phones) written as epsilons."""
        out_arcs: list[list[Arc]] = [[] for _ in self.states]
        final: list[Weight] = [ZERO] * len(self.states)
        for s, arcs in enumerate(self.out_arcs):
            for ilabel, seq, nxt, weight in arcs:
                if first_removed is not None and ilabel >= first_removed:
                    ilabel = 0
                cur = s
                if nxt is None:
                    for i, sym in enumerate(seq):
                        new = len(out_arcs)
                        out_arcs.append([])
                        final.append(ZERO)
                        out_arcs[cur].append((0, sym, weight if i == 0 else ONE, new))
                        cur = new
                    final[cur] = ONE if seq else weight
                    continue
                for i in range(len(seq) - 1):
                    new = len(out_arcs)
                    out_arcs.append([])
                    final.append(ZERO)
                    out_arcs[cur].append((ilabel if i == 0 else 0, seq[i],
                                          weight if i == 0 else ONE, new))
                    cur = new
                last = len(seq) <= 1
                out_arcs[cur].append((ilabel if last else 0, seq[-1] if seq else 0,
                                      weight if last else ONE, nxt))
        return Lattice(out_arcs, final, 0)

    def output_compact(self) -> CompactLattice:
        """Output(MutableFst<CompactArc>*): one state per determinized state."""
        out = CompactLattice([[] for _ in self.states], [None] * len(self.states), 0)
        for s, arcs in enumerate(self.out_arcs):
            for ilabel, seq, nxt, weight in arcs:
                if nxt is None:
                    out.final[s] = (weight, seq)
                else:
                    out.arcs[s].append((ilabel, weight, seq, nxt))
        return out


@dataclass(frozen=True)
class _PhoneMap:
    """Per transition-id: its phone, and whether it starts a phone without being a self-loop
    (TransitionIdIsStartOfPhone && !IsSelfLoop)."""

    phone: list[int]
    starts_phone: list[bool]

    @classmethod
    def of(cls, trans: TransitionInfo) -> _PhoneMap:
        phone, starts = [0], [False]
        for p, hmm_state, _fwd, _loop in trans.tuples:
            for dest, _prob in trans.topology.entry(p)[hmm_state].transitions:
                phone.append(p)
                starts.append(hmm_state == 0 and dest != hmm_state)
        return cls(phone, starts)


def _insert_phones(lat: Lattice, phones: _PhoneMap) -> int:
    """DeterminizeLatticeInsertPhones: a phone label where a phone starts (not on the start
    state's arcs, as Kaldi); returns the first phone label."""
    first = 1 + max(map(_state_of, itertools.chain.from_iterable(lat.arcs)), default=0)
    for s in range(len(lat.arcs)):
        if s == lat.start:
            continue
        arcs = lat.arcs[s]
        for i, (ilabel, olabel, w, nxt) in enumerate(arcs):
            if olabel == 0 or not phones.starts_phone[olabel]:
                continue
            label = first + phones.phone[olabel]
            if ilabel == 0:
                arcs[i] = (label, olabel, w, nxt)
            else:
                extra = lat.add_state()
                lat.arcs[extra].append((label, 0, ONE, nxt))
                arcs[i] = (ilabel, olabel, w, extra)
    return first


def determinize_lattice_phone_pruned(raw: Lattice, trans: TransitionInfo,
                                     beam: float) -> CompactLattice:
    """DeterminizeLatticePhonePrunedWrapper on a raw lattice (transition-ids in, words out)
    with Kaldi's default options (phone and word determinization, no minimization)."""
    if not raw.arcs:
        return CompactLattice()
    # Invert, TopSort and ArcSort by ilabel, in one copy
    order = top_order([[a[3] for a in arcs] for arcs in raw.arcs])
    new = [0] * len(order)
    for i, s in enumerate(order):
        new[s] = i
    lat = Lattice([sorted([(a[1], a[0], a[2], new[a[3]]) for a in raw.arcs[s]], key=_state_of)
                   for s in order], [raw.final[s] for s in order], new[raw.start])
    first_phone = _insert_phones(lat, _PhoneMap.of(trans))
    det = _Determinizer(top_sort(lat), beam)
    det.run()
    det = _Determinizer(top_sort(det.output_lattice(first_removed=first_phone)), beam)
    det.run()
    return connect_compact(det.output_compact())


def connect_compact(clat: CompactLattice) -> CompactLattice:
    """fst::Connect on a compact lattice."""
    if not clat.arcs:
        return clat
    keep = _connected([[a[3] for a in arcs] for arcs in clat.arcs],
                      [f is not None and not _is_zero(f[0]) for f in clat.final], clat.start)
    new = {s: i for i, s in enumerate(keep)}
    return CompactLattice([[(*a[:3], new[a[3]]) for a in clat.arcs[s] if a[3] in new]
                           for s in keep], [clat.final[s] for s in keep], new.get(clat.start, 0))


def scale_acoustics(clat: CompactLattice, scale: float) -> CompactLattice:
    """fst::ScaleLattice(AcousticLatticeScale(scale)): acoustic costs times ``scale``."""
    return scale_lattice(clat, 1.0, scale)


def scale_lattice(clat: CompactLattice, lm_scale: float, ac_scale: float) -> CompactLattice:
    """ScaleTupleWeight with a diagonal scale, computed in double and stored as float32."""
    def sc(w: Weight) -> Weight:
        if math.isinf(w[0]):
            return ZERO
        return (F32(lm_scale * float(w[0]) + 0.0 * float(w[1])),
                F32(0.0 * float(w[0]) + ac_scale * float(w[1])))

    return CompactLattice([[(a[0], sc(a[1]), a[2], a[3]) for a in arcs] for arcs in clat.arcs],
                          [None if f is None else (sc(f[0]), f[1]) for f in clat.final],
                          clat.start)


# ---- raw lattices from kaldi-decoder ---------------------------------------------------------


@contextlib.contextmanager
def no_cyclic_gc() -> Iterator[None]:
    """Python's cyclic garbage collector paused: a lattice's conversion and determinization
    make hundreds of thousands of tuples, none in a cycle, and the collections they trigger
    (each walking every live object of the job) cost a tenth to a half of the determinizer's
    time. Reference counting still frees everything; the collector's state is restored."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


@dataclass(frozen=True)
class LatticeOptions(Options):
    """steps/nnet3/decode.sh's options for latgen-faster-mapped (--min-active: Kaldi's
    default). The compiled search (asrdist.decode._lattice_native) honours them all, as
    LatticeFasterDecoder does: past --max-active tokens a frame's beam narrows to the
    max-active-th best cost (plus 0.5), below --min-active it widens to the min-active-th.
    kaldi-decoder's LatticeSimpleDecoder, the search where the module was not built, has
    neither (it keeps every token within the beam) and differs in which tokens it keeps: on the
    mini recipe's GMM scores and trigram graph 17 of 20 lattices are equivalent to
    latgen-faster-mapped's, all 39 sweep points' best paths equal Kaldi's
    (bench.lattice_decode)."""

    acwt: float = option(0.1, "Acoustic scale of the search (the main text and ctm: LMWT "
                               "1/acwt).", check=POSITIVE)
    beam: float = option(15.0, "Decoding beam.", check=POSITIVE)
    lattice_beam: float = option(8.0, "Lattice beam: paths kept within it of the best.",
                                 check=POSITIVE)
    max_active: int = option(7000, "Most tokens a frame expands (the beam narrows past it).",
                             check=at_least(2))
    min_active: int = option(200, "Fewest tokens a frame expands (the beam widens below it).",
                             check=at_least(0))

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.min_active > self.max_active:
            raise AsrdistError(f"--min-active {self.min_active} is above --max-active "
                               f"{self.max_active}")


def load_kaldi_decoder() -> ModuleType:
    """kaldi_decoder, imported; an error in a process that imported kaldilm first (it would
    hang). A process that decodes calls this before it imports :mod:`asrdist.decode.graph`."""
    if "kaldilm" in sys.modules and "kaldi_decoder" not in sys.modules:
        raise AsrdistError("lattice decoding needs kaldi_decoder, which hangs a process that "
                           "imported kaldilm first (asrdist.decode.graph): run it in a "
                           "process that imports asrdist.decode.lattice before the graph code")
    import kaldi_decoder

    return kaldi_decoder


class LatticeDecoder:
    """One search per utterance, to a determinized compact lattice (acoustic costs unscaled, as
    latgen-faster-mapped writes them).

    With asrdist.decode._lattice_native built, the search is its own (LatticeFasterDecoder's
    algorithm, over HCLG's file mapped in memory: :func:`asrdist.decode.graph.search_graph`).
    Without it, kaldi-decoder's LatticeSimpleDecoder over a kaldifst graph: kaldi-decoder is
    imported here, never at module level, as it hangs a process that imported kaldilm before
    it, so that path refuses to start in such a process.
    """

    def __init__(self, hclg: str | os.PathLike | kaldifst.StdFst, trans: TransitionInfo,
                 opts: LatticeOptions = LatticeOptions(), native: bool | None = None):
        """``hclg``: the graph's file (vector or const), or for kaldi-decoder a kaldifst FST.
        ``native``: the compiled search and determinizer (True), kaldi-decoder's search and
        the Python determinizer (False), or the compiled ones where they were built (None)."""
        if native is None:
            native = _lattice_native is not None
            if not native:
                _warn_not_built()
        elif native and _lattice_native is None:
            raise AsrdistError("asrdist.decode._lattice_native is not built (pip install -e .)")
        self.native = native
        self.trans = trans
        self.opts = opts
        self.reached_final = False
        phones = _PhoneMap.of(trans)
        self.phone = np.array(phones.phone, dtype=np.int32)
        self.starts_phone = np.array(phones.starts_phone, dtype=np.uint8)
        is_path = isinstance(hclg, (str, os.PathLike))
        if native:
            _check_native_build()
            if not is_path:
                raise AsrdistError("the compiled search reads HCLG from its file: pass its path")
            from asrdist.decode.graph import search_graph

            self.searcher = _lattice_native.Search(search_graph(hclg), opts.beam,
                                                   opts.max_active, opts.min_active,
                                                   opts.lattice_beam)
            return
        kaldi_decoder = load_kaldi_decoder()
        self.kd = kaldi_decoder
        if is_path:
            from asrdist.decode.graph import read_fst

            hclg = read_fst(hclg)
        self.hclg = hclg  # the C++ decoder keeps a reference only
        config = kaldi_decoder.LatticeSimpleDecoderConfig()
        config.beam = opts.beam
        config.lattice_beam = opts.lattice_beam
        self.decoder = kaldi_decoder.LatticeSimpleDecoder(hclg, config)

    def search(self, pdf_scores: np.ndarray) -> bytes | kaldifst.Lattice:
        """The raw lattice of a frames x pdfs score matrix (scaled by acwt): OpenFst's binary
        layout of it from the compiled search, a kaldifst.Lattice from kaldi-decoder.

        As decode.sh (--allow-partial=true), a search that reaches no final state still gives
        a lattice, ending in the last frame's states; ``reached_final`` says which it was.
        """
        if pdf_scores.ndim != 2 or pdf_scores.shape[0] == 0:
            raise AsrdistError("cannot decode an empty score matrix")
        matrix = np.ascontiguousarray(
            F32(self.opts.acwt) * pdf_scores[:, self.trans.tid_to_pdf[1:]].astype(F32))
        if self.native:
            try:
                raw, self.reached_final = self.searcher.decode(matrix)
            except ValueError as e:
                raise AsrdistError(str(e)) from None
            return raw
        self.decoder.decode(self.kd.DecodableCtc(matrix))
        self.reached_final = self.decoder.final_relative_cost() != math.inf
        ok, raw = self.decoder.get_raw_lattice(True)
        if not ok or raw.num_states == 0:
            raise AsrdistError("the search kept no lattice (all tokens pruned)")
        return raw

    def decode(self, pdf_scores: np.ndarray) -> CompactLattice:
        """latgen-faster-mapped's lattice for one utterance."""
        if self.native:
            return self.compact_native(self.search(pdf_scores))
        return self.compact_python(self.search(pdf_scores))

    def compact_python(self, raw: bytes | kaldifst.Lattice) -> CompactLattice:
        """The determinized compact lattice of a raw one, its acoustic costs unscaled (times
        1/acwt), by the Python here. The cost offsets' rounding (:func:`_with_cost_offsets`)
        is for kaldi-decoder's lattices: the compiled search's costs are rounded already."""
        with no_cyclic_gc():
            lat = connect(_from_kaldifst(raw))
            clat = determinize_lattice_phone_pruned(
                lat if isinstance(raw, bytes) else _with_cost_offsets(lat), self.trans,
                self.opts.lattice_beam)
            return scale_acoustics(clat, 1.0 / self.opts.acwt)

    def compact_native(self, raw: bytes | kaldifst.Lattice) -> CompactLattice:
        """:meth:`compact_python`'s lattice, by asrdist.decode._lattice_native."""
        try:
            flat = _lattice_native.compact_lattice(_fst_bytes(raw), self.phone,
                                                   self.starts_phone, self.opts.lattice_beam,
                                                   1.0 / self.opts.acwt,
                                                   not isinstance(raw, bytes))
        except ValueError as e:
            raise AsrdistError(str(e)) from None
        return _compact_from_flat(*flat)


_warned_not_built = False


def _warn_not_built() -> None:
    """One line, once a process: the compiled module is missing."""
    global _warned_not_built
    if not _warned_not_built:
        _warned_not_built = True
        log.warning("asrdist.decode._lattice_native is not built (pip install -e .): lattices "
                    "are searched by kaldi-decoder (no --max-active) and determinized and "
                    "swept in Python: several times the CPU")


def _compact_from_flat(start: int, counts: np.ndarray, words: np.ndarray, weights: np.ndarray,
                       nexts: np.ndarray, finals: np.ndarray, final_weights: np.ndarray,
                       offsets: np.ndarray, labels: np.ndarray) -> CompactLattice:
    """The CompactLattice of _lattice_native.compact_lattice's flat arrays, its weights
    float32 scalars and its strings tuples of ints, as the Python determinizer makes them."""
    ids, ends = labels.tolist(), offsets.tolist()
    strings = [tuple(ids[a:b]) for a, b in zip(ends, ends[1:], strict=False)]
    num_arcs = len(words)
    flat = list(zip(words.tolist(), zip(list(weights[0::2]), list(weights[1::2]), strict=True),
                    strings[:num_arcs], nexts.tolist(), strict=True))
    arcs, lo = [], 0
    for k in counts.tolist():
        arcs.append(flat[lo:lo + k])
        lo += k
    final_w = zip(list(final_weights[0::2]), list(final_weights[1::2]), strict=True)
    final = [(w, string) if is_final else None
             for is_final, w, string in zip(finals.tolist(), final_w, strings[num_arcs:],
                                            strict=True)]
    return CompactLattice(arcs, final, start)


def _with_cost_offsets(lat: Lattice) -> Lattice:
    """The acoustic costs as LatticeFasterDecoder stores them, rounded through its per-frame
    cost offsets: ``(offset + cost) - offset`` in float32, the offset being minus the frame's
    best token cost (those costs themselves kept relative to the offsets). This moves costs by
    an ulp or so; without it a lattice differs from latgen-faster-mapped's in the last bits.
    The frame's best token is looked for among the lattice's states (the search's best
    token at a frame survives lattice pruning unless all its continuations were pruned).
    """
    n = len(lat.arcs)
    frame = [-1] * n
    frame[lat.start] = 0
    by_frame: list[list[int]] = [[lat.start]]
    for f in itertools.count():  # states per frame, in order (emitting arcs go one frame on)
        if f >= len(by_frame):
            break
        i = 0
        while i < len(by_frame[f]):
            s = by_frame[f][i]
            i += 1
            for ilabel, _o, _w, nxt in lat.arcs[s]:
                if frame[nxt] < 0:
                    frame[nxt] = f + (ilabel != 0)
                    if frame[nxt] == len(by_frame):
                        by_frame.append([])
                    by_frame[frame[nxt]].append(nxt)
    tot = [F32(np.inf)] * n
    tot[lat.start] = F32(0.0)
    arcs = [list(a) for a in lat.arcs]
    for states in by_frame:
        changed = True
        while changed:  # non-emitting arcs within the frame: tot = cur + graph
            changed = False
            for s in states:
                for ilabel, _o, w, nxt in arcs[s]:
                    if ilabel == 0 and tot[s] + w[0] < tot[nxt]:
                        tot[nxt], changed = tot[s] + w[0], True
        offset = -min(tot[s] for s in states)
        for s in states:
            for i, (ilabel, olabel, w, nxt) in enumerate(arcs[s]):
                if ilabel == 0:
                    continue
                ac = offset + w[1]  # cost_offset - LogLikelihood
                cand = (tot[s] + ac) + w[0]
                if cand < tot[nxt]:
                    tot[nxt] = cand
                arcs[s][i] = (ilabel, olabel, (w[0], ac - offset), nxt)
    return Lattice(arcs, lat.final, lat.start)


_FST_ARC = np.dtype([("i", "<i4"), ("o", "<i4"), ("w1", "<f4"), ("w2", "<f4"), ("n", "<i4")])
_FST_STATE = struct.Struct("<ffq")  # final weight (LatticeWeight), number of arcs


def _fst_bytes(fst: bytes | kaldifst.Lattice) -> bytes:
    """A kaldifst.Lattice in OpenFst's binary VectorFst layout (the compiled search's raw
    lattice already is): kaldifst can only write that to a file, and the file is in memory
    (/dev/shm where there is one)."""
    if isinstance(fst, bytes):
        return fst
    shm = Path("/dev/shm")
    fd, name = tempfile.mkstemp(suffix=".fst", dir=shm if shm.is_dir() else None)
    try:
        os.close(fd)
        if not fst.write(name):
            raise AsrdistError(f"kaldifst could not write the raw lattice to {name}")
        return Path(name).read_bytes()
    finally:
        os.unlink(name)


def _from_kaldifst(fst: bytes | kaldifst.Lattice) -> Lattice:
    """A kaldifst.Lattice, exact float32 weights (unlike its text form), read from its binary
    layout (:func:`_fst_bytes`), 30x faster than its arc iterator's Python calls."""
    data = _fst_bytes(fst)
    pos = 4  # magic
    for _ in range(2):  # fst type ("vector"), arc type ("lattice4")
        pos += 4 + struct.unpack_from("<i", data, pos)[0]
    start, num_states = struct.unpack_from("<qq", data, pos + 16)  # after version, flags, props
    pos += 40
    final_bytes: list[bytes] = []
    counts: list[int] = []
    chunks: list[bytes] = []
    state = _FST_STATE.unpack_from
    for _ in range(num_states):
        k = state(data, pos)[2]
        final_bytes.append(data[pos:pos + 8])
        pos += 16
        counts.append(k)
        chunks.append(data[pos:pos + 20 * k])
        pos += 20 * k
    costs = np.frombuffer(b"".join(final_bytes), "<f4")
    finals: list[Weight] = list(zip(list(costs[0::2]), list(costs[1::2]), strict=True))
    table = np.frombuffer(b"".join(chunks), _FST_ARC)
    flat = list(zip(table["i"].tolist(), table["o"].tolist(),
                    zip(list(table["w1"]), list(table["w2"]), strict=True), table["n"].tolist(),
                    strict=True))
    arcs, lo = [], 0
    for k in counts:
        arcs.append(flat[lo:lo + k])
        lo += k
    return Lattice(arcs, finals, start)


# ---- the sweep: lattice-scale | lattice-add-penalty | lattice-best-path ----------------------


@dataclass
class BestPath:
    """One path of a compact lattice: its words and its frames' transition-ids."""

    words: list[int]
    alignment: list[int]


def best_path_words(clat: CompactLattice, lmwt: float, wip: float) -> list[int]:
    """Words of the best path after ``lattice-scale --inv-acoustic-scale=lmwt`` and
    ``lattice-add-penalty --word-ins-penalty=wip`` (lattice-best-path's output)."""
    return best_path(clat, lmwt, wip).words


def best_path(clat: CompactLattice, lmwt: float, wip: float) -> BestPath:
    """The best path after ``lattice-scale --inv-acoustic-scale=lmwt | lattice-add-penalty
    --word-ins-penalty=wip``: lattice-best-path's words, lattice-1best's transition-ids."""
    scaled = scale_lattice(clat, 1.0, 1.0 / lmwt)
    pen = F32(wip)
    arcs = [[(a[0], (a[1][0] + pen, a[1][1]) if a[0] != 0 else a[1], a[2], a[3]) for a in arcs]
            for arcs in scaled.arcs]
    return _shortest_path(CompactLattice(arcs, scaled.final, scaled.start))


def best_paths(clat: CompactLattice, points: Sequence[tuple[float, float]],
               native: bool | None = None) -> list[BestPath]:
    """:func:`best_path` at each (lmwt, wip) of ``points``, in one call to the compiled sweep
    (``native`` None: where it was built; the Python per point without it). Issue 32: the
    Python sweep cost more than the compiled lattice pass itself."""
    if native is None:
        native = _lattice_native is not None
    if not native:
        return [best_path(clat, lmwt, wip) for lmwt, wip in points]
    _check_native_build()
    try:
        found = _lattice_native.best_paths(*_flat_of(clat), [(float(lmwt), float(wip))
                                                             for lmwt, wip in points])
    except ValueError as e:
        raise AsrdistError(str(e)) from None
    return [BestPath(words, alignment) for words, alignment in found]


def _flat_of(clat: CompactLattice) -> tuple:
    """A compact lattice in _lattice_native.compact_lattice's flat arrays (the inverse of
    :func:`_compact_from_flat`)."""
    arcs = [a for state_arcs in clat.arcs for a in state_arcs]
    finals = [f is not None for f in clat.final]
    strings = [a[2] for a in arcs] + [() if f is None else f[1] for f in clat.final]
    offsets = np.zeros(len(strings) + 1, np.int64)
    np.cumsum([len(string) for string in strings], out=offsets[1:])
    return (clat.start, np.array([len(a) for a in clat.arcs], np.int64),
            np.array([a[0] for a in arcs], np.int32),
            np.array([w for a in arcs for w in a[1]], F32).reshape(-1),
            np.array([a[3] for a in arcs], np.int32), np.array(finals, np.uint8),
            np.array([w for f in clat.final for w in (ZERO if f is None else f[0])], F32),
            offsets, np.fromiter(itertools.chain.from_iterable(strings), np.int32))


def _shortest_path(clat: CompactLattice) -> BestPath:
    """CompactLatticeShortestPath: states in top-sorted order, the first of equal costs kept
    (strict <), as Kaldi."""
    n = clat.num_states
    if not n:
        return BestPath([], [])
    order = list(range(n))
    if clat.start != 0 or any(a[3] <= s for s, arcs in enumerate(clat.arcs) for a in arcs):
        order = top_order([[a[3] for a in arcs] for arcs in clat.arcs])
    best = [math.inf] * (n + 1)
    back: list[tuple[int, int, tuple[int, ...]]] = [(-1, 0, ())] * (n + 1)
    best[clat.start] = 0.0
    for s in order:
        for word, weight, string, nxt in clat.arcs[s]:
            c = best[s] + cost(weight)
            if c < best[nxt]:
                best[nxt], back[nxt] = c, (s, word, string)
        f = clat.final[s]
        if f is not None and best[s] + cost(f[0]) < best[n]:
            best[n], back[n] = best[s] + cost(f[0]), (s, 0, f[1])
    words: list[int] = []
    strings: list[tuple[int, ...]] = []
    s = n
    while back[s][0] >= 0:
        s, word, string = back[s]
        strings.append(string)
        if word:
            words.append(word)
    return BestPath(words[::-1], [t for string in reversed(strings) for t in string])
