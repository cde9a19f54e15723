"""convert-ali against Kaldi's own (tests/gmm/kaldi_convert: the command and its output are
committed), and a tied model's first GMMs from the tree statistics."""

from __future__ import annotations

from pathlib import Path

import kaldi_hmm_gmm as khg  # noqa: F401, I001  (before anything loading kaldifst)
import numpy as np
import pytest

from asrdist.errors import AsrdistError
from asrdist.gmm.tied_model import AlignmentConverter, init_tied_gmms
from asrdist.gmm.tree_stats import TreeStats
from asrdist.hmm.event_map import Leaf, Split
from asrdist.hmm.tree import read_tree
from asrdist.kaldi.alignments import read_alignments
from asrdist.kaldi.transition_model import read_transition_model

CASE = Path(__file__).parent / "kaldi_convert"


def test_alignments_convert_exactly_as_kaldis_convert_ali():
    converter = AlignmentConverter(read_transition_model(CASE / "mono.mdl"),
                                   read_transition_model(CASE / "tri1.mdl"),
                                   read_tree(CASE / "tri1.tree"))
    expected = dict(read_alignments(CASE / "expected.ali.gz"))
    mono = dict(read_alignments(CASE / "mono_ali.1.gz"))
    assert len(expected) == len(mono) == 20
    for utt, ali in mono.items():
        assert np.array_equal(converter.convert(utt, ali), expected[utt]), utt


def test_an_alignment_cut_inside_a_phone_is_refused():
    converter = AlignmentConverter(read_transition_model(CASE / "mono.mdl"),
                                   read_transition_model(CASE / "tri1.mdl"),
                                   read_tree(CASE / "tri1.tree"))
    utt, ali = next(iter(read_alignments(CASE / "mono_ali.1.gz")))
    with pytest.raises(AsrdistError, match=f"utterance {utt}: alignment does not end"):
        converter.convert(utt, ali[:-3])


def test_each_leaf_starts_as_the_gaussian_of_its_statistics():
    def row(count, mean, var):
        return np.array([count, count * mean, count * (var + mean * mean)])

    stats = TreeStats({((-1, 0), (1, 1)): row(10, 1.0, 4.0), ((-1, 0), (1, 2)): row(30, 5.0, 1.0),
                       ((-1, 0), (1, 3)): row(10, 3.0, 0.001)}, 1)
    tree = Split(1, frozenset({1, 3}), Leaf(0), Leaf(1))
    am, occs = init_tied_gmms(stats, tree, 3)  # pdf 2: no statistics
    assert occs.tolist() == [20.0, 30.0, 0.0]
    # pdf 0 pools 10 frames N(1, 4) and 10 frames N(3, 0.001): mean 2, variance 1 + 2.0005
    assert am.get_pdf(0).means[0, 0] == pytest.approx(2.0)
    assert 1 / am.get_pdf(0).inv_vars[0, 0] == pytest.approx(3.0005, rel=1e-5)
    assert am.get_pdf(1).means[0, 0] == pytest.approx(5.0)
    assert am.get_pdf(2).means[0, 0] == pytest.approx((10 + 150 + 30) / 50)  # all pooled
