"""Made-up denominator lattices of a chosen size (the sequence-data tests, and
bench.sequence_memory at Switchboard's scale): what a learner holds of a lattice grows with its
transition-id elements, about (arcs across a frame) x frames, so these are confusion networks,
``width`` competing words between consecutive states, each word 10..40 frames."""

from __future__ import annotations

import numpy as np

from asrdist.decode.lattice import CompactLattice


def denominator_lattice(rng: np.random.Generator, frames: int, width: int,
                        num_tids: int) -> CompactLattice:
    """A lattice of ``frames`` frames: words of 10..40 frames, each of ``width`` alternatives
    a run-length string of transition-ids 1..``num_tids`` with random graph and acoustic
    costs."""
    ends = np.cumsum(rng.integers(10, 41, frames // 10 + 1))
    ends = np.append(ends[ends < frames], frames)
    clat = CompactLattice(start=0)
    begin = 0
    for end in ends.tolist():
        arcs = []
        for _ in range(width):
            runs = rng.integers(3, 11, (end - begin) // 3 + 1)
            tids = np.repeat(rng.integers(1, num_tids + 1, runs.size), runs)[:end - begin]
            graph, acoustic = rng.uniform(0, 10, 2).astype(np.float32)
            arcs.append((int(rng.integers(1, 1000)), (graph, acoustic),
                         tuple(tids.tolist()), len(clat.arcs) + 1))
        clat.arcs.append(arcs)
        clat.final.append(None)
        begin = end
    clat.arcs.append([])
    clat.final.append(((np.float32(0), np.float32(0)), ()))
    return clat
