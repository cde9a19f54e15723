"""Tree statistics against Kaldi's own acc-tree-stats on the same model, alignments and
features (tests/gmm/kaldi_convert/make_expected.sh), and phone segmentation by hand."""

from __future__ import annotations

from pathlib import Path

import kaldi_hmm_gmm as khg  # noqa: F401, I001  (before anything loading kaldifst)
import kaldiio
import numpy as np
import pytest

from asrdist.gmm.tree_stats import accumulate_tree_stats
from asrdist.hmm.phone_ali import TransitionTable, split_to_phones
from asrdist.kaldi.alignments import read_alignments
from asrdist.kaldi.transition_model import read_transition_model
from tests.gmm.kaldi_text import read_text_tree_stats

CASE = Path(__file__).parent / "kaldi_convert"


def test_tree_statistics_equal_kaldis_acc_tree_stats():
    table = TransitionTable.of(read_transition_model(CASE / "mono.mdl"))
    alis = dict(read_alignments(CASE / "mono_ali.1.gz"))
    feats = dict(kaldiio.load_ark(str(CASE / "feats.ark")))
    ours = accumulate_tree_stats(table, ((u, f, alis[u]) for u, f in feats.items()), {1, 2})
    kaldi = read_text_tree_stats(CASE / "treeacc.txt")
    assert set(ours.events) == set(kaldi.events) and len(kaldi.events) == 69
    for event, row in kaldi.events.items():  # Kaldi prints 7 significant digits
        assert ours.events[event] == pytest.approx(row, rel=2e-6, abs=1e-4), event


def test_self_loops_after_the_final_transition_stay_in_the_phone():
    """A reordered alignment (compile-train-graphs' default): the frame leaving a state comes
    first, its self-loops after it, the last phone's included."""
    table = TransitionTable.of(read_transition_model(CASE / "mono.mdl"))
    ali = next(iter(read_alignments(CASE / "mono_ali.1.gz")))[1]
    segs = split_to_phones(table, ali, "u")
    assert segs.ends[-1] == len(ali) and segs.starts[0] == 0
    # every phone instance's frames share its phone, and each starts in HMM state 0
    assert np.all(table.hmm_state[ali[segs.starts]] == 0)
    assert table.self_loop[ali[-1]]  # this alignment ends on a reordered self-loop
