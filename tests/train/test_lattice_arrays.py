"""The vectorised forward-backward of sequence training against Kaldi's own lattice-to-post
and lattice-to-smbr-post on real lattices (tests/decode/kaldi_post: three FSDD clips decoded
by a digits monophone GMM, Kaldi's outputs and make_expected.sh, the command that made them),
on the acoustics the lattices store."""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np
import pytest

from asrdist.decode.lattice_io import iter_lattices_binary
from asrdist.kaldi.alignments import read_alignments
from asrdist.kaldi.transition_model import read_transition_model
from asrdist.train.lattice_arrays import (
    expected_accuracy,
    forward_backward,
    lattice_arrays,
    occupancies,
)
from asrdist.train.sequence_loss import Numerator, smbr_accuracy
from tests.decode.test_lattice_post_kaldi import read_text_posteriors

HERE = Path(__file__).parents[1] / "decode" / "kaldi_post"
KAPPA = 0.1  # make_expected.sh's --acoustic-scale
SILENCE = frozenset({1, 2})  # its --silence-phones 1:2


def _lattices():
    with gzip.open(HERE / "lat.1.gz", "rb") as f:
        return dict(iter_lattices_binary(f.read()))


def _by_tid(lat, per_arc: np.ndarray, num_tids: int) -> np.ndarray:
    out = np.zeros((lat.frames, num_tids))
    np.add.at(out, (lat.elem_t, lat.elem_tid), per_arc[lat.elem_arc])
    return out


def _dense(post: list[list[tuple[int, float]]], num_tids: int) -> np.ndarray:
    out = np.zeros((len(post), num_tids))
    for t, frame in enumerate(post):
        for tid, p in frame:
            out[t, tid] = p
    return out


@pytest.mark.parametrize(("expected", "one_silence_class"), [
    ("post.txt", None), ("smbr.txt", False), ("smbr_one_silence.txt", True)])
def test_the_posteriors_equal_kaldis(expected, one_silence_class):
    trans = read_transition_model(HERE / "final.mdl")
    num_tids = len(trans.tid_to_pdf)
    alignments = dict(read_alignments(HERE / "ali.1.gz"))
    kaldi = read_text_posteriors(HERE / expected)
    lattices = _lattices()
    assert kaldi.keys() == lattices.keys()
    for utt, clat in lattices.items():
        lat = lattice_arrays(clat)
        cost = lat.graph + KAPPA * lat.acoustic
        fb = forward_backward(lat, cost)
        if one_silence_class is None:
            ours = occupancies(lat, fb, np.arange(num_tids), (lat.frames, num_tids))
        else:
            num = Numerator(alignments[utt], trans.tid_to_pdf, trans.tid_to_phone, SILENCE)
            _, signed = expected_accuracy(lat, fb, cost,
                                          smbr_accuracy(lat, num, one_silence_class))
            ours = _by_tid(lat, signed, num_tids)
        theirs = _dense(kaldi[utt], num_tids)
        assert ours.shape == theirs.shape
        np.testing.assert_allclose(ours, theirs, atol=2e-6, err_msg=utt)


def test_a_lattice_reaching_a_state_at_two_times_is_refused():
    from asrdist.decode.lattice import CompactLattice
    from asrdist.errors import AsrdistError

    f = np.float32
    clat = CompactLattice(arcs=[[(1, (f(0), f(0)), (1,), 1), (1, (f(0), f(0)), (1, 1), 1)], []],
                          final=[None, ((f(0), f(0)), ())], start=0)
    with pytest.raises(AsrdistError, match="state 1 is reached after 1 and 2 frames"):
        lattice_arrays(clat)
