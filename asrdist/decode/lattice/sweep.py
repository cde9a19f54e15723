"""The sweep: what ``lattice-scale --inv-acoustic-scale=LMWT | lattice-add-penalty
--word-ins-penalty=WIP | lattice-best-path`` gives at each point (and lattice-1best's
transition-ids, for the word times), compiled where built (all points in one call), the
Python per point otherwise, to the same paths, ties included.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from asrdist.decode.lattice import native as _compiled
from asrdist.decode.lattice.fst import CompactLattice, scale_lattice, top_order
from asrdist.decode.lattice.native import FlatLattice
from asrdist.decode.lattice.weights import F32, cost
from asrdist.errors import AsrdistError


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


def best_paths(lat: CompactLattice | FlatLattice, points: Sequence[tuple[float, float]],
               native: bool | None = None) -> list[BestPath]:
    """:func:`best_path` at each (lmwt, wip) of ``points``, in one call to the compiled sweep
    (``native`` None: where it was built; the Python per point without it); a
    :class:`FlatLattice` is read as it is. Issue 32: the Python sweep cost more than the
    compiled lattice pass itself."""
    compiled = _compiled.compiled()
    if native is None:
        native = compiled is not None
    if not native:
        clat = lat.compact() if isinstance(lat, FlatLattice) else lat
        return [best_path(clat, lmwt, wip) for lmwt, wip in points]
    _compiled.check_native_build()
    arrays = lat.arrays if isinstance(lat, FlatLattice) else _compiled.flat_of(lat)
    try:
        found = compiled.best_paths(*arrays, [(float(lmwt), float(wip)) for lmwt, wip in points])
    except ValueError as e:
        raise AsrdistError(str(e)) from None
    return [BestPath(words, alignment) for words, alignment in found]


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
