"""GMM statistics against khg's per-frame accumulation."""

from __future__ import annotations

import kaldi_hmm_gmm as khg
import numpy as np

from asrdist.gmm.stats import ALL_FLAGS, GmmStats, accumulate, split_by_count, to_khg_accs
from asrdist.kaldi.am_gmm import am_params_from_khg


def random_am(rng: np.random.Generator, num_pdfs: int = 3, nmix: int = 4, dim: int = 5):
    am = khg.AmDiagGmm()
    for _ in range(num_pdfs):
        gmm = khg.DiagGmm(nmix, dim)
        gmm.set_weights(rng.dirichlet(np.ones(nmix)).astype(np.float32))
        gmm.set_invvars_and_means(rng.uniform(0.5, 2.0, (nmix, dim)).astype(np.float32),
                                  rng.normal(0, 2, (nmix, dim)).astype(np.float32))
        gmm.compute_gconsts()
        am.add_pdf(gmm)
    return am


def test_vectorised_stats_match_khg_per_frame_accumulation() -> None:
    rng = np.random.default_rng(1)
    am = random_am(rng)
    feats = rng.normal(0, 2, (200, 5)).astype(np.float32)
    pdfs = rng.integers(0, 3, 200)
    tids = rng.integers(1, 8, 200)

    ref = khg.AccumAmDiagGmm()
    ref.init(am, ALL_FLAGS)
    ref_ll = sum(ref.accumulate_for_gmm(am, f, int(p), 1.0) for f, p in zip(feats, pdfs,
                                                                            strict=True))
    params = am_params_from_khg(am)
    stats = GmmStats.zeros(params, 7)
    accumulate(stats, params, feats, pdfs, tids)
    assert np.isclose(stats.log_like, ref_ll, rtol=1e-5)
    assert stats.trans[1:].sum() == 200 and stats.frames == 200
    ours = to_khg_accs(stats, am)
    for pdf in range(3):
        a, b = ours.get_acc(pdf), ref.get_acc(pdf)
        assert np.allclose(a.occupancy, b.occupancy, rtol=1e-5)
        assert np.allclose(a.mean_accumulator, b.mean_accumulator, rtol=1e-4, atol=1e-3)
        assert np.allclose(a.variance_accumulator, b.variance_accumulator, rtol=1e-4, atol=1e-3)


def _one_gaussian_am(mean: float = 8.0, var: float = 0.25):
    gmm = khg.DiagGmm(nmix=1, dim=3)
    gmm.set_weights(np.ones(1, dtype=np.float32))
    gmm.set_invvars_and_means(np.full((1, 3), 1 / var, np.float32),
                              np.full((1, 3), mean, np.float32))
    gmm.compute_gconsts()
    am = khg.AmDiagGmm()
    am.add_pdf(gmm)
    am.compute_gconsts()
    return am


def _split(seed):
    am = _one_gaussian_am()
    split_by_count(am, np.array([100.0], np.float32), 3, 0.25, 20.0, 0.01, seed)
    pdf = am.get_pdf(0)
    return np.array(pdf.weights), np.array(pdf.means)  # copies: the model goes with this call


def test_a_split_is_repeatable_and_keeps_the_weighted_mean():
    """One Gaussian split into three (weights 1/4, 1/2, 1/4: the heaviest halved twice): the
    same seed gives the same means in another model, another seed others; the copies moved
    apart by about 0.01 standard deviations (0.005 here), their weighted mean still 8."""
    weights, means = _split((0, 5))
    again_w, again = _split((0, 5))
    _, other = _split((1, 5))
    np.testing.assert_array_equal(means, again)
    np.testing.assert_array_equal(weights, again_w)
    assert not np.array_equal(means, other)
    np.testing.assert_allclose(np.sort(weights), [0.25, 0.25, 0.5])
    np.testing.assert_allclose(weights @ means, np.full(3, 8.0), atol=1e-5)
    spread = np.abs(means - 8.0)
    assert spread.max() < 0.05 and len({m.tobytes() for m in means}) == 3
