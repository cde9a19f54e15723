"""build-tree against Kaldi's own: the same statistics, roots and questions (tests/gmm/
kaldi_tree, made by make_inputs.py) must tie the same contexts together as the tree Kaldi's
build-tree wrote from them (make_expected.sh: the command and Kaldi's log are committed)."""

from __future__ import annotations

from pathlib import Path

import kaldi_hmm_gmm as khg  # noqa: I001  (before anything loading kaldifst)
import pytest

from asrdist.gmm.build_tree import TreeOptions, build_tree, read_roots
from asrdist.gmm.questions import compile_questions
from asrdist.hmm.event_map import lookup
from asrdist.hmm.tree import read_tree
from tests.gmm.kaldi_text import read_text_tree_stats

CASE = Path(__file__).parent / "kaldi_tree"


def test_our_tree_ties_exactly_as_kaldis_build_tree():
    stats = read_text_tree_stats(CASE / "treeacc.txt")
    questions = [[int(p) for p in line.split()]
                 for line in (CASE / "questions.int").read_text().splitlines() if line]
    topo = khg.HmmTopology()
    topo.read((CASE / "topo").read_text())
    npc = topo.get_phone_to_num_pdf_classes()
    tree, summary = build_tree(stats, read_roots(CASE / "roots.int"),
                               compile_questions(questions, max(npc)), dict(enumerate(npc)),
                               TreeOptions(max_leaves=40))
    kaldi = read_tree(CASE / "tree")
    # build-tree.log: "split 34 times, #leaves now 40", "like-impr = 2.05475 per frame",
    # "removed 7 leaves", "Rounded ... by removing 1 leaves", "Num-leaves is now 32"
    assert (summary.splits, summary.clustered_away, summary.leaves) == (34, 8, 32)
    assert summary.split_gain_per_frame == pytest.approx(2.05475, abs=1e-5)
    assert kaldi.num_pdfs == 32
    ours_to_kaldi: dict[int, int] = {}
    for event in stats.events:
        e = dict(event)
        window = [e.get(0, 0), e[1], e.get(2, 0)]
        ok, theirs = kaldi.compute(window, e[-1])
        assert ok
        mine = lookup(tree, {**e, 0: window[0], 2: window[2]})
        assert ours_to_kaldi.setdefault(mine, theirs) == theirs, event
    assert len(set(ours_to_kaldi.values())) == len(ours_to_kaldi)  # one to one
