"""Kaldi's DeterminizeLattice (fstext/determinize-lattice-inl.h), not pruned: what
lattice-lmrescore and lattice-lmrescore-const-arpa run after composing a lattice with an LM.

It differs from the pruned determinizer (:mod:`asrdist.decode.lattice.determinize_pruned`,
decoding's) in what
fixes the output's state numbers and in what it keeps: no beam, nothing dropped; an output
state is numbered when its subset is first met, and the states are processed last-in,
first-out (``queue_.back()``); an epsilon closure is first-in, first-out. Weights are
Kaldi's float32 LatticeWeight, computed with the same helpers as the pruned port, so the
costs come out as Kaldi's do.
"""

from __future__ import annotations

from collections import deque

from asrdist.decode.lattice.determinize_pruned import Element, compact_output, normalize_subset
from asrdist.decode.lattice.fst import CompactLattice, Lattice
from asrdist.decode.lattice.raw import no_cyclic_gc
from asrdist.decode.lattice.weights import (
    ONE,
    Weight,
    approx_equal,
    compare_with_strings,
    is_zero,
    times,
)

_TempArc = tuple[int, tuple[int, ...], int | None, Weight]  # ilabel, string, next|final, weight


class _SubsetTable:
    """Kaldi's subset hash: states and strings equal, weights equal to within delta."""

    def __init__(self) -> None:
        self.table: dict[tuple, list[tuple[list[Weight], object]]] = {}

    def find(self, subset: list[Element]) -> object | None:
        for weights, value in self.table.get(tuple((e[0], e[1]) for e in subset), ()):
            if all(approx_equal(w, e[2]) for w, e in zip(weights, subset, strict=True)):
                return value
        return None

    def add(self, subset: list[Element], value: object) -> None:
        key = tuple((e[0], e[1]) for e in subset)
        self.table.setdefault(key, []).append(([e[2] for e in subset], value))


class _Determinizer:
    """LatticeDeterminizer on a lattice whose input labels are the words."""

    def __init__(self, lat: Lattice) -> None:
        self.lat = lat
        self.emitting = [not is_zero(lat.final[s]) or
                         any(a[0] != 0 and not is_zero(a[2]) for a in lat.arcs[s])
                         for s in range(len(lat.arcs))]
        self.subsets: list[list[Element]] = []
        self.out_arcs: list[list[_TempArc]] = []
        self.minimal = _SubsetTable()
        self.initial = _SubsetTable()
        self.queue: list[int] = []

    def run(self) -> CompactLattice:
        if not self.lat.arcs:
            return CompactLattice()
        start = self._minimal(self._closure([(self.lat.start, (), ONE)]))
        self._state_of(start)  # the start subset is not normalized, as Kaldi's
        while self.queue:
            s = self.queue.pop()
            self._process_final(s)
            self._process_transitions(s)
        return self._output()

    def _closure(self, subset: list[Element]) -> list[Element]:
        """EpsilonClosure: the best (weight, string) per state reached by input epsilons."""
        cur = {e[0]: e for e in subset}
        queue = deque(subset)
        replaced = False
        while queue:
            elem = queue.popleft()
            if replaced and cur[elem[0]] != elem:
                continue
            for ilabel, olabel, w, nxt in self.lat.arcs[elem[0]]:
                if ilabel != 0 or is_zero(w):
                    continue
                new = (nxt, elem[1] + olabel, times(elem[2], w))
                old = cur.get(nxt)
                if old is None:
                    cur[nxt] = new
                    queue.append(new)
                elif compare_with_strings(new[2], new[1], old[2], old[1]) == 1:
                    cur[nxt] = new
                    queue.append(new)
                    replaced = True
        return sorted(cur.values(), key=lambda e: e[0])

    def _minimal(self, subset: list[Element]) -> list[Element]:
        return [e for e in subset if self.emitting[e[0]]]

    def _state_of(self, minimal: list[Element]) -> int:
        """MinimalToStateId: the output state of a minimal subset, numbered when new."""
        found = self.minimal.find(minimal)
        if found is not None:
            return found  # type: ignore[return-value]
        sid = len(self.subsets)
        self.subsets.append(minimal)
        self.out_arcs.append([])
        self.minimal.add(minimal, sid)
        self.queue.append(sid)
        return sid

    def _process_final(self, sid: int) -> None:
        best: tuple[Weight, tuple[int, ...]] | None = None
        for state, string, weight in self.subsets[sid]:
            w = times(weight, self.lat.final[state])
            if not is_zero(w) and (best is None or
                                    compare_with_strings(w, string, best[0], best[1]) == 1):
                best = (w, string)
        if best is not None:
            self.out_arcs[sid].append((0, best[1], None, best[0]))

    def _process_transitions(self, sid: int) -> None:
        elems: list[tuple[int, Element]] = []
        for state, string, weight in self.subsets[sid]:
            for ilabel, olabel, w, nxt in self.lat.arcs[state]:
                if ilabel != 0 and not is_zero(w):
                    elems.append((ilabel, (nxt, string + olabel, times(weight, w))))
        elems.sort(key=lambda p: (p[0], p[1][0]))
        i = 0
        while i < len(elems):
            label = elems[i][0]
            unique: list[Element] = []  # MakeSubsetUnique: the best element per state
            while i < len(elems) and elems[i][0] == label:
                e = elems[i][1]
                if unique and unique[-1][0] == e[0]:
                    if compare_with_strings(e[2], e[1], unique[-1][2], unique[-1][1]) == 1:
                        unique[-1] = e
                else:
                    unique.append(e)
                i += 1
            self._process_transition(sid, label, unique)

    def _process_transition(self, sid: int, label: int, subset: list[Element]) -> None:
        subset, tot_weight, common = normalize_subset(subset)
        found = self.initial.find(subset)
        if found is None:
            minimal, weight, string = normalize_subset(self._minimal(self._closure(subset)))
            found = (self._state_of(minimal), string, weight)
            self.initial.add(subset, found)
        nxt, next_string, next_weight = found  # type: ignore[misc]
        self.out_arcs[sid].append((label, common + next_string, nxt,
                                   times(tot_weight, next_weight)))

    def _output(self) -> CompactLattice:
        """Output(MutableFst<CompactArc>*): one state per output subset, start 0."""
        return compact_output(self.out_arcs)


def determinize_lattice(lat: Lattice) -> CompactLattice:
    """DeterminizeLattice(ifst, &compact_ofst) with default options: input labels (words)
    become the compact lattice's labels, output labels its strings; an output label here is a
    tuple of transition-ids (a string on one arc: :func:`asrdist.decode.lmrescore.to_string_
    lattice`). An empty lattice (no start state) gives an empty one."""
    with no_cyclic_gc():
        return _Determinizer(lat).run()
