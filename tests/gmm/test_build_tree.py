"""Decision-tree state tying: the objective against Kaldi's own GaussClusterable, the tying of
a toy problem computed by hand, the tree as Kaldi's binary file read back by Kaldi's code."""

from __future__ import annotations

import math

import kaldi_hmm_gmm as khg  # noqa: I001  (before anything loading kaldifst)
import numpy as np
import pytest

from asrdist.errors import AsrdistError
from asrdist.gmm.build_tree import Root, TreeOptions, build_tree, read_roots
from asrdist.gmm.questions import compile_questions
from asrdist.gmm.tree_stats import TreeStats, gauss_objf
from asrdist.hmm.event_map import (
    Leaf,
    Table,
    context_dependency_bytes,
    lookup,
    to_context_dependency,
)
from asrdist.kaldi.topology import make_topo


def _row(count: float, mean: float, var: float) -> np.ndarray:
    """Statistics [count, sum, sum of squares] of 1-dim frames with this mean and variance."""
    return np.array([count, count * mean, count * (var + mean * mean)])


def test_objective_is_kaldis_gauss_clusterable():
    rng = np.random.default_rng(0)
    for var_floor in (0.01, 2.0):
        x = rng.normal(0.0, 1.0, size=(50, 4)) * [1.0, 0.05, 3.0, 1.0]
        row = np.concatenate([[len(x)], x.sum(0), (x * x).sum(0)])
        kaldi = khg.GaussClusterable(x.sum(0), (x * x).sum(0), var_floor, float(len(x)))
        assert gauss_objf(row, var_floor)[0] == pytest.approx(kaldi.objf(), rel=1e-6)


def _toy_stats() -> TreeStats:
    """Phone 1 (one pdf-class) after phones 2, 3 and 4: 100 frames each, variance 1; after 2
    and 3 the mean is 0, after 4 it is 10."""
    rows = {2: _row(100, 0.0, 1.0), 3: _row(100, 0.0, 1.0), 4: _row(100, 10.0, 1.0)}
    return TreeStats({((-1, 0), (0, left), (1, 1), (2, 0)): r for left, r in rows.items()}, 1)


# By hand: 300 frames pooled have mean 10/3 and E[x^2] = (100 + 100 + 10100) / 300, so variance
# 34.333 - 11.111 = 23.222; two Gaussians of variance 1 instead gain 0.5 * 300 * log(23.222).
HAND_GAIN = 150 * math.log((10300 / 3 / 100) - (10 / 3) ** 2)

QUESTIONS = compile_questions([[2], [3], [4], [2, 3], [3, 4], [1, 2, 3, 4]], max_pdf_classes=1)
ROOTS = [Root((1,), shared=True, split=True)]


def _event(left: int) -> dict[int, int]:
    return {-1: 0, 0: left, 1: 1, 2: 0}


def test_toy_tying_by_hand_splits_the_odd_left_context_off():
    tree, summary = build_tree(_toy_stats(), ROOTS, QUESTIONS, {1: 1},
                               TreeOptions(max_leaves=10, thresh=300.0, cluster_thresh=0.0))
    assert summary.splits == 1 and summary.leaves == 2
    assert summary.split_gain_per_frame * 300 == pytest.approx(HAND_GAIN)
    assert lookup(tree, _event(2)) == lookup(tree, _event(3)) != lookup(tree, _event(4))


def test_a_split_below_the_threshold_is_not_made():
    assert HAND_GAIN < 500
    tree, summary = build_tree(_toy_stats(), ROOTS, QUESTIONS, {1: 1},
                               TreeOptions(max_leaves=10, thresh=500.0))
    assert summary.splits == 0 and summary.leaves == 1


def test_clustering_merges_leaves_losing_at_most_its_threshold():
    kept, summary = build_tree(_toy_stats(), ROOTS, QUESTIONS, {1: 1},
                               TreeOptions(max_leaves=10, thresh=300.0,
                                           cluster_thresh=HAND_GAIN - 1))
    assert summary.splits == 1 and summary.leaves == 2
    # by default the threshold is the smallest split's gain, which merging its two leaves
    # loses again: Kaldi's clusterer merges at <= (its float objectives are equal), so here
    merged, summary = build_tree(_toy_stats(), ROOTS, QUESTIONS, {1: 1},
                                 TreeOptions(max_leaves=10, thresh=300.0))
    assert summary.splits == 1 and summary.leaves == 1
    assert len({lookup(merged, _event(c)) for c in (2, 3, 4)}) == 1


def test_a_not_split_root_keeps_its_stub_leaves():
    roots = [Root((1,), shared=False, split=False)]
    tree, summary = build_tree(_toy_stats(), roots, QUESTIONS, {1: 1},
                               TreeOptions(max_leaves=10, thresh=0.0))
    assert summary.splits == 0 and summary.leaves == 1


def test_max_leaves_stops_the_splitting():
    tree, summary = build_tree(_toy_stats(), ROOTS, QUESTIONS, {1: 1},
                               TreeOptions(max_leaves=1, thresh=0.0))
    assert summary.leaves == 1


def test_read_roots_refuses_a_malformed_line(tmp_path):
    path = tmp_path / "roots.int"
    path.write_text("shared split 1\nnot-shared not-split 2 3\n")
    assert read_roots(path) == [Root((1,), True, True), Root((2, 3), False, False)]
    path.write_text("shared split 1\nshared 2\n")
    with pytest.raises(AsrdistError, match=r"roots.int:2"):
        read_roots(path)


def _topo() -> khg.HmmTopology:
    topo = khg.HmmTopology()
    topo.read(make_topo([2, 3], [1]))
    return topo


def test_monophone_table_is_byte_for_byte_kaldis_tree(tmp_path):
    """Kaldi's own monophone tree (MonophoneContextDependencyShared, written by Kaldi's
    ContextDependency::Write) against the same table written here."""
    topo = _topo()
    kaldi = khg.monophone_context_dependency_shared(
        phone_classes=[[1], [2], [3]], phone2num_pdf_classes=topo.get_phone_to_num_pdf_classes())
    kaldi.write(True, str(tmp_path / "tree"))
    ours = Table(0, (None, Table(-1, tuple(Leaf(i) for i in range(5))),
                     Table(-1, (Leaf(5), Leaf(6), Leaf(7))), Table(-1, (Leaf(8), Leaf(9),
                                                                          Leaf(10)))))
    assert context_dependency_bytes(ours, 1, 0) == (tmp_path / "tree").read_bytes()


def test_a_built_triphone_tree_maps_in_kaldi_as_it_does_here():
    tree, _ = build_tree(_toy_stats(), ROOTS, QUESTIONS, {1: 1},
                         TreeOptions(max_leaves=10, thresh=300.0, cluster_thresh=0.0))
    ctx_dep = to_context_dependency(tree, 3, 1)
    assert (ctx_dep.context_width, ctx_dep.central_position, ctx_dep.num_pdfs) == (3, 1, 2)
    for left in (0, 2, 3, 4):
        for right in (0, 2):
            ok, pdf = ctx_dep.compute([left, 1, right], 0)
            assert ok and pdf == lookup(tree, {-1: 0, 0: left, 1: 1, 2: right})
