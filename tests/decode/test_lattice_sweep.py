"""The compiled sweep (asrdist.decode.lattice._native.best_paths) against the Python
:func:`best_path` it was transcribed from, at s5c's 39 points: the same words and
transition-ids on every committed lattice (Kaldi's, its rescored ones, our decoder's on the
decoding tests' score matrices), on lattices full of equal-cost paths, and by hand where the
tie rule (the first of equal costs kept, states in top-sorted order) decides. Kaldi's own
sweep on the compiled path: tests/decode/test_lattice.py."""

from __future__ import annotations

import numpy as np
import pytest

from asrdist.decode.lattice import (
    ONE,
    BestPath,
    CompactLattice,
    LatticeDecoder,
    best_path,
    best_paths,
)
from asrdist.decode.lmrescore import read_lattice_archive
from asrdist.errors import AsrdistError
from asrdist.kaldi.transition_model import read_transition_model
from tests.decode.test_lattice import EXPECTED
from tests.decode.test_lattice_native import _score_matrices

POINTS = [(float(lmwt), wip) for lmwt in range(5, 18) for wip in (0.0, 0.5, 1.0)]
F32 = np.float32


def _assert_same(lats: dict[str, CompactLattice]) -> None:
    for utt, clat in lats.items():
        python = [best_path(clat, lmwt, wip) for lmwt, wip in POINTS]
        assert best_paths(clat, POINTS, native=True) == python, utt
        assert best_paths(clat, POINTS, native=False) == python, utt


@pytest.mark.parametrize("archive", ["lat.1.bin", "removed.1.bin", "rescored.1.bin"])
def test_compiled_sweep_equals_the_python_on_kaldis_lattices(archive):
    _assert_same(read_lattice_archive(EXPECTED / archive))


def test_compiled_sweep_equals_the_python_on_our_decoders_lattices():
    trans = read_transition_model(EXPECTED / "final.mdl")
    dec = LatticeDecoder(EXPECTED / "HCLG.fst", trans, native=True)
    lats = {utt: dec.decode(scores) for utt, scores in _score_matrices()}
    assert max(clat.num_states for clat in lats.values()) > 20
    _assert_same(lats)


def _tied_lattice(rng: np.random.Generator, n: int) -> CompactLattice:
    """A random acyclic compact lattice, states numbered out of order, its weights from a few
    values so that many paths cost exactly the same: graph costs in halves and quarters,
    acoustic costs mostly 0 (scaled by 1/LMWT they round)."""
    perm = [int(i) for i in rng.permutation(n)]
    costs = [F32(0.0), F32(0.5), F32(1.0), F32(0.25)]
    acoustic = [F32(0.0), F32(0.0), F32(0.0), F32(1.0)]
    arcs: list[list] = [[] for _ in range(n)]
    final: list = [None] * n
    for i in range(n - 1):
        for j in sorted(rng.choice(np.arange(i + 1, n), size=min(3, n - 1 - i), replace=False)):
            w = (costs[rng.integers(4)], acoustic[rng.integers(4)])
            arcs[perm[i]].append((int(rng.integers(3)), w, (i, int(j)), perm[int(j)]))
    for i in range(n // 2, n):
        final[perm[i]] = ((costs[rng.integers(4)], acoustic[rng.integers(4)]), (100 + i,))
    return CompactLattice(arcs, final, perm[0])


def test_compiled_sweep_equals_the_python_where_paths_tie():
    rng = np.random.default_rng(32)
    _assert_same({f"tied{k}": _tied_lattice(rng, int(rng.integers(2, 30))) for k in range(60)})


def test_the_first_of_equal_costs_in_top_order_is_kept():
    # state 3 before 2 in the top order (0's arcs: to 3, then to 2); both reach final state 1
    # at the same cost, so the path through 3 (words 5, 7) is kept; the state numbers go
    # backwards (3 -> 1), so the order is the top sort's, not the states' numbers
    g1 = (F32(1.0), F32(0.0))
    clat = CompactLattice([[(5, g1, (1,), 3), (6, g1, (2,), 2)], [], [(8, g1, (4,), 1)],
                           [(7, g1, (3,), 1)]], [None, (ONE, (9,)), None, None], 0)
    for native in (True, False):
        assert best_paths(clat, [(10.0, 0.0), (10.0, 1.0)], native=native) == \
            [BestPath([5, 7], [1, 3, 9])] * 2


def test_empty_lattice_and_a_cycle():
    assert best_paths(CompactLattice([], [], 0), POINTS[:2], native=True) == \
        [BestPath([], [])] * 2
    cycle = CompactLattice([[(1, ONE, (), 1)], [(2, ONE, (), 0)]], [None, (ONE, ())], 0)
    with pytest.raises(AsrdistError, match="^the lattice has a cycle"):
        best_paths(cycle, POINTS[:1], native=True)
