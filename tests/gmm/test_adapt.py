"""fMLLR statistics from lattice posteriors (decode_fmllr.sh's second pass) and best paths."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from asrdist.errors import AsrdistError
from asrdist.gmm.adapt import FmllrOptions, SoftAlignment, speaker_stats
from asrdist.kaldi.am_gmm import AmDiagGmmParams
from tests.gmm.test_fmllr import diag_gmm

# tid 1 -> pdf 0 (phone 1), tid 2 -> pdf 1 (phone 1), tid 3 -> pdf 2 (phone 2: silence)
INFO = SimpleNamespace(tid_to_pdf=np.array([-1, 0, 1, 2]), tid_to_phone=np.array([0, 1, 1, 2]))
OPTS = FmllrOptions(silence_weight=0.01, silence=frozenset({2}))


def model() -> AmDiagGmmParams:
    rng = np.random.default_rng(3)
    return AmDiagGmmParams(2, [diag_gmm(rng.normal(0, 2, (2, 2)), rng.uniform(0.5, 1, (2, 2)))
                               for _ in range(3)])


def stats_of(ali, feats):
    return speaker_stats(model(), INFO, [("u", feats, ali)], lambda _: "s", OPTS)["s"]


def test_posteriors_weigh_each_frame_s_pdfs_as_best_paths_would_together():
    """Frames shared 0.25 / 0.75 between two paths' tids: the statistics are 0.25 of one
    path's plus 0.75 of the other's; silence (tid 3) still weighted 0.01."""
    feats = np.random.default_rng(4).normal(size=(3, 2))
    one, other = np.array([1, 1, 3]), np.array([2, 1, 3])
    post = [[(1, 0.25), (2, 0.75)], [(1, 1.0)], [(3, 1.0)]]
    soft = stats_of(SoftAlignment.of_posterior(post), feats)
    a, b = stats_of(one, feats), stats_of(other, feats)
    assert soft.beta == pytest.approx(0.25 * a.beta + 0.75 * b.beta)
    assert soft.beta == pytest.approx(2.01)
    assert np.allclose(soft.k, 0.25 * a.k + 0.75 * b.k)
    assert np.allclose(soft.g, 0.25 * a.g + 0.75 * b.g)


def test_posteriors_of_another_length_are_refused():
    with pytest.raises(AsrdistError, match="utterance u: 2 aligned frames but 3 feature"):
        stats_of(SoftAlignment.of_posterior([[(1, 1.0)], [(2, 1.0)]]), np.zeros((3, 2)))
