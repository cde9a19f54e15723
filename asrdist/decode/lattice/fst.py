"""Kaldi's two lattice types and what they are walked with: :class:`Lattice` (state-level,
transition-ids in, words out) and :class:`CompactLattice` (a word acceptor whose weights carry
the transition-id strings, what lat.N.gz holds); connect, topological order and scaling.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from asrdist.decode.lattice.weights import F32, ZERO, Weight, is_zero
from asrdist.errors import AsrdistError

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
                      [not is_zero(f) for f in lat.final], lat.start)
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


def connect_compact(clat: CompactLattice) -> CompactLattice:
    """fst::Connect on a compact lattice."""
    if not clat.arcs:
        return clat
    keep = _connected([[a[3] for a in arcs] for arcs in clat.arcs],
                      [f is not None and not is_zero(f[0]) for f in clat.final], clat.start)
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
