"""fMLLR estimation: a hand-solved one-dimensional case, and a known distortion undone."""

from __future__ import annotations

import numpy as np
import pytest

from asrdist.errors import AsrdistError
from asrdist.gmm.fmllr import (
    FmllrStats,
    compose,
)
from asrdist.kaldi.am_gmm import AmDiagGmmParams, DiagGmmParams
from asrdist.kaldi.gmm_feats import (
    FeatureTransform,
    add_deltas,
    read_speaker_transforms,
    write_speaker_transforms,
)
from asrdist.kaldi.gmm_feats import apply_affine as apply_fmllr


def diag_gmm(means: np.ndarray, variances: np.ndarray) -> DiagGmmParams:
    """A pdf of equally weighted Gaussians (gconsts as Kaldi's DiagGmm::ComputeGconsts)."""
    inv = 1.0 / variances
    weights = np.full(len(means), 1.0 / len(means))
    gconsts = (np.log(weights) - 0.5 * (means.shape[1] * np.log(2 * np.pi)
                                        + np.log(variances).sum(1) + (means * means * inv).sum(1)))
    return DiagGmmParams(gconsts.astype(np.float32), weights.astype(np.float32),
                         (means * inv).astype(np.float32), inv.astype(np.float32))


def test_one_gaussian_in_one_dimension_matches_the_closed_form():
    """By hand: maximising beta log|a| - sum (a y + b - mu)^2 / (2 var) gives
    |a| = sqrt(var / var_y), b = mu - a mean_y (both signs of a score the same)."""
    rng = np.random.default_rng(0)
    y = rng.normal(3.0, 2.0, size=(500, 1))
    mu, var = 1.0, 0.25
    am = AmDiagGmmParams(1, [diag_gmm(np.array([[mu]]), np.array([[var]]))])
    stats = FmllrStats.zeros(1)
    stats.accumulate(am, y, np.zeros(500, dtype=np.int64), np.ones(500))
    w, gain = stats.estimate()
    a = np.sqrt(var / y.var()) * np.sign(w[0, 0])
    assert w[0, 0] == pytest.approx(a, rel=1e-9)
    assert w[0, 1] == pytest.approx(mu - a * y.mean(), rel=1e-9)
    assert gain > 0
    assert apply_fmllr(w, y).mean() == pytest.approx(mu, abs=1e-5)


def test_a_known_affine_distortion_of_a_speaker_is_undone():
    """Frames drawn from a 5-pdf model, then distorted by y = M x + c: the estimate maps them
    back (W ~ [M^-1, -M^-1 c]) and every row update raises the auxiliary function."""
    rng = np.random.default_rng(1)
    dim, pdfs = 4, []
    for _ in range(5):  # one Gaussian each: the posteriors do not depend on the distortion
        pdfs.append(diag_gmm(rng.normal(0, 3, size=(1, dim)), rng.uniform(0.3, 1.0, (1, dim))))
    am = AmDiagGmmParams(dim, pdfs)
    labels = rng.integers(0, 5, size=6000)
    comp = np.zeros(6000, dtype=np.int64)
    x = np.array([rng.normal(am.pdfs[p].means[c], np.sqrt(am.pdfs[p].variances[c]))
                  for p, c in zip(labels, comp, strict=True)])
    m = np.eye(dim) + rng.normal(0, 0.15, size=(dim, dim))
    c = rng.normal(0, 1, size=dim)
    y = x @ m.T + c
    stats = FmllrStats.zeros(dim)
    half = 3000  # two jobs' statistics, summed
    stats.accumulate(am, y[:half], labels[:half], np.ones(half))
    other = FmllrStats.zeros(dim)
    other.accumulate(am, y[half:], labels[half:], np.ones(6000 - half))
    total = stats + other
    w, gain = total.estimate()
    inv = np.linalg.inv(m)
    assert np.abs(w[:, :-1] - inv).max() < 0.05
    assert np.abs(w[:, -1] + inv @ c).max() < 0.1
    assert gain > 0
    one_pass = total.estimate(num_iters=1)[1]
    assert one_pass <= gain + 1e-12


def test_weights_zero_frames_count_nothing_and_few_frames_keep_the_identity():
    am = AmDiagGmmParams(2, [diag_gmm(np.zeros((1, 2)), np.ones((1, 2)))])
    stats = FmllrStats.zeros(2)
    stats.accumulate(am, np.ones((30, 2)), np.zeros(30, dtype=np.int64), np.zeros(30))
    assert stats.beta == 0
    w, gain = stats.estimate(min_count=20.0)
    assert np.array_equal(w, np.hstack([np.eye(2), np.zeros((2, 1))])) and gain == 0.0


def test_compose_is_applying_one_after_the_other():
    rng = np.random.default_rng(2)
    a, b = rng.normal(size=(3, 4)), rng.normal(size=(3, 4))
    x = rng.normal(size=(5, 3))
    assert np.allclose(apply_fmllr(compose(b, a), x), apply_fmllr(b, apply_fmllr(a, x)),
                       atol=1e-5)


def test_transforms_round_trip_and_a_wrong_shape_is_one_line(tmp_path):
    w = {"spk2": np.hstack([2 * np.eye(2), np.ones((2, 1))]), "spk1": np.eye(2, 3)}
    write_speaker_transforms(tmp_path / "trans.ark", w)
    back = read_speaker_transforms(tmp_path / "trans.ark")
    assert list(back) == ["spk1", "spk2"] and np.allclose(back["spk2"], w["spk2"])
    write_speaker_transforms(tmp_path / "bad.ark", {"s": np.eye(2)})
    with pytest.raises(AsrdistError, match="bad.ark: speaker s's transform"):
        read_speaker_transforms(tmp_path / "bad.ark")


def test_a_speakers_transform_applies_after_the_deltas():
    rng = np.random.default_rng(3)
    cmn = rng.normal(size=(7, 2)).astype(np.float32)
    w = np.hstack([rng.normal(size=(6, 6)), rng.normal(size=(6, 1))])
    adapted = FeatureTransform().with_speakers({"a": w})
    expect = add_deltas(cmn).astype(np.float64) @ w[:, :-1].T + w[:, -1]
    assert np.allclose(adapted.apply(cmn, "a"), expect, atol=1e-4)
    with pytest.raises(AsrdistError, match="no fMLLR transform for speaker b"):
        adapted.apply(cmn, "b")
