"""Comparing compact lattices to the bit: the compiled determinizer's output against the
Python one it was transcribed from (the test suite, and bench.lattice_native_equal on a whole
test set)."""

from __future__ import annotations

import numpy as np

from asrdist.decode.lattice import CompactLattice


def lattice_bits(clat: CompactLattice) -> tuple:
    """Every number of ``clat``, its float32 weights as their bits (-0.0 is not 0.0, a NaN
    equals itself); TypeError where a weight is not a numpy float32 or a string element not an
    int (a lattice equal in value but built of other types is not the same lattice)."""
    def w(weight: tuple) -> tuple[int, ...]:
        if not all(type(x) is np.float32 for x in weight[:2]):
            raise TypeError(f"a weight of types {[type(x).__name__ for x in weight[:2]]}, not "
                            "float32")
        return tuple(int(x.view(np.uint32)) for x in weight[:2])

    for f in clat.final:
        if f is not None and not all(type(t) is int for t in f[1]):
            raise TypeError("a final weight's string holds other than ints")
    return (clat.start,
            [[(a[0], w(a[1]), a[2], a[3]) for a in arcs] for arcs in clat.arcs],
            [None if f is None else (w(f[0]), f[1]) for f in clat.final])
