"""MLLT as gmm-acc-mllt / est-mllt / gmm-transform-means / compose-transforms compute it."""

from __future__ import annotations

import numpy as np
import pytest

from asrdist.errors import AsrdistError
from asrdist.gmm.mllt import (
    MlltStats,
    compose_transforms,
    estimate_mllt,
    mllt_objective,
    transform_khg_means,
    transform_means,
)
from asrdist.kaldi.am_gmm import (
    AmDiagGmmParams,
    DiagGmmParams,
    am_params_from_khg,
    compute_gconsts,
    to_khg_am_diag_gmm,
)


def _gmm(weights, means, variances) -> DiagGmmParams:
    weights = np.asarray(weights, dtype=np.float32)
    inv_vars = (1.0 / np.asarray(variances, dtype=np.float64)).astype(np.float32)
    means_invvars = (np.asarray(means, dtype=np.float64) * inv_vars).astype(np.float32)
    return DiagGmmParams(compute_gconsts(weights, means_invvars, inv_vars), weights,
                         means_invvars, inv_vars)


def _random_am(rng: np.random.Generator, dim: int, gauss: tuple[int, ...]) -> AmDiagGmmParams:
    return AmDiagGmmParams(dim, [
        _gmm(np.full(n, 1.0 / n), rng.normal(size=(n, dim)), rng.uniform(0.5, 2.0, (n, dim)))
        for n in gauss
    ])


def _log_gauss(x: np.ndarray, weight: float, mean: np.ndarray, var: np.ndarray) -> np.ndarray:
    """log(w N(x; mean, diag var)) per row of x, from the textbook formula."""
    return (np.log(weight) - 0.5 * np.log(2 * np.pi * var).sum()
            - 0.5 * (((x - mean) ** 2) / var).sum(axis=1))


def _posteriors(gmm: DiagGmmParams, x: np.ndarray) -> np.ndarray:
    ll = np.stack([_log_gauss(x, float(w), m, v) for w, m, v in
                   zip(gmm.weights, gmm.means.astype(np.float64),
                       gmm.variances.astype(np.float64), strict=True)], axis=1)
    post = np.exp(ll - ll.max(axis=1, keepdims=True))
    return post / post.sum(axis=1, keepdims=True)


def test_one_dimension_update_is_the_closed_form() -> None:
    # 1-D, one Gaussian N(0, 1): G = sum x^2 = 1 + 4 + 9 + 16 = 30 over beta = 4 frames; the
    # objective 4 log|a| - a^2 G / 2 is maximal at a = sqrt(4 / 30).
    am = AmDiagGmmParams(1, [_gmm([1.0], [[0.0]], [[1.0]])])
    stats = MlltStats.zeros(1)
    stats.accumulate(am, np.array([[1.0], [-2.0], [3.0], [4.0]]), np.zeros(4, dtype=int))
    assert stats.beta == 4.0 and np.isclose(stats.g[0, 0, 0], 30.0)
    result = estimate_mllt(stats, num_iters=3)
    assert np.isclose(abs(result.matrix[0, 0]), np.sqrt(4 / 30))
    # per frame: (4 log sqrt(4/30) - 4/2) / 4 - (0 - 30/2) / 4
    assert np.isclose(result.objf_impr_per_frame, 0.5 * np.log(4 / 30) - 0.5 + 30 / 8)


def test_statistics_follow_kaldis_per_frame_sum() -> None:
    # Kaldi (MlltAccs::AccumulateFromPosteriors): G_i += gamma_tm / var_mi d d^T, with
    # d = mu_m - x_t, for every frame and Gaussian; beta += gamma_tm. Written out plainly.
    rng = np.random.default_rng(1)
    am = _random_am(rng, 3, (2, 3))
    feats = rng.normal(size=(40, 3))
    pdfs = rng.integers(0, 2, size=40)
    weights = rng.choice([0.0, 1.0, 0.5], size=40)
    want_g, want_beta = np.zeros((3, 3, 3)), 0.0
    for t in range(40):
        gmm = am.pdfs[pdfs[t]]
        post = weights[t] * _posteriors(gmm, feats[t:t + 1])[0]
        for m, gamma in enumerate(post):
            d = gmm.means[m].astype(np.float64) - feats[t]
            for i in range(3):
                want_g[i] += gamma * float(gmm.inv_vars[m, i]) * np.outer(d, d)
            want_beta += gamma
    jobs = [MlltStats.zeros(3), MlltStats.zeros(3)]
    jobs[0].accumulate(am, feats[:25], pdfs[:25], weights[:25])
    jobs[1].accumulate(am, feats[25:], pdfs[25:], weights[25:])
    summed = jobs[0] + jobs[1]
    assert np.isclose(summed.beta, want_beta) and np.isclose(want_beta, weights.sum())
    assert np.allclose(summed.g, want_g, rtol=1e-6)


def _fit_diag(feats: np.ndarray, pdfs: np.ndarray, num_pdfs: int) -> AmDiagGmmParams:
    """One ML diagonal Gaussian per pdf (what gmm-est would re-estimate)."""
    return AmDiagGmmParams(feats.shape[1], [
        _gmm([1.0], feats[pdfs == p].mean(axis=0, keepdims=True),
             feats[pdfs == p].var(axis=0, keepdims=True)) for p in range(num_pdfs)
    ])


def test_mllt_recovers_a_rotation_that_diagonalises_the_classes() -> None:
    # Three classes, diagonal Gaussians in a hidden space z = R x with different variances
    # per dimension and class; in x space their covariances are full. Alternating est-mllt
    # with re-estimating the diagonal GMM (train_lda_mllt.sh's mllt_iters) must find R up to
    # row scaling, sign and order.
    rng = np.random.default_rng(2)
    rotation = np.linalg.qr(rng.normal(size=(3, 3)))[0] @ np.diag([1.0, 2.0, 0.5])
    stddev = np.sqrt([[1.0, 4.0, 9.0], [9.0, 1.0, 4.0], [4.0, 9.0, 1.0]])
    pdfs = np.repeat(np.arange(3), 3000)
    hidden = rng.normal(size=(pdfs.size, 3)) * stddev[pdfs] + 3.0 * np.eye(3)[pdfs]
    feats = hidden @ np.linalg.inv(rotation).T
    total = np.eye(3)
    am = _fit_diag(feats, pdfs, 3)
    for _ in range(4):
        stats = MlltStats.zeros(3)
        stats.accumulate(am, feats @ total.T, pdfs)
        result = estimate_mllt(stats, num_iters=50)
        assert result.objf_impr_per_frame > -1e-12
        assert np.all(np.diff(result.objf_per_iter) >= -1e-12)  # never falls, pass by pass
        assert result.objf_per_iter[0] >= mllt_objective(stats, np.eye(3)) - 1e-12
        total = compose_transforms(result.matrix, total)
        am = _fit_diag(feats @ total.T, pdfs, 3)
    relative = total @ np.linalg.inv(rotation)  # a scaled signed permutation when recovered
    relative /= np.abs(relative).max(axis=1, keepdims=True)
    assert sorted(np.argmax(np.abs(relative), axis=1).tolist()) == [0, 1, 2]
    assert np.sort(np.abs(relative), axis=1)[:, :2].max() < 0.05


def test_transformed_model_scores_as_the_auxiliary_function_says() -> None:
    # With the Gaussian posteriors gamma fixed, sum gamma [log N(A x; A mu, var) + log|det A|]
    # (the diagonal variances kept, as gmm-transform-means keeps them) changes from A = I
    # exactly as est-mllt's objective beta log|det A| - 1/2 sum_i a_i^T G_i a_i does.
    rng = np.random.default_rng(3)
    am = _random_am(rng, 3, (2, 1))
    feats = rng.normal(size=(30, 3))
    pdfs = rng.integers(0, 2, size=30)
    matrix = np.eye(3) + 0.3 * rng.normal(size=(3, 3))
    moved = transform_means(am, matrix)

    def weighted_score(model: AmDiagGmmParams, x: np.ndarray, logdet: float) -> float:
        total = 0.0
        for t in range(30):
            post = _posteriors(am.pdfs[pdfs[t]], feats[t:t + 1])[0]  # under the old model
            gmm = model.pdfs[pdfs[t]]
            for m, gamma in enumerate(post):
                ll = _log_gauss(x[t:t + 1], float(gmm.weights[m]),
                                gmm.means[m].astype(np.float64),
                                gmm.variances[m].astype(np.float64))[0]
                total += gamma * (ll + logdet)
        return total

    stats = MlltStats.zeros(3)
    stats.accumulate(am, feats, pdfs)
    gain = (weighted_score(moved, feats @ matrix.T, np.log(abs(np.linalg.det(matrix))))
            - weighted_score(am, feats, 0.0))
    want = stats.beta * (mllt_objective(stats, matrix) - mllt_objective(stats, np.eye(3)))
    assert np.isclose(gain, want, rtol=1e-5)


def test_transform_means_linear_and_affine_by_hand() -> None:
    am = AmDiagGmmParams(2, [_gmm([0.25, 0.75], [[1.0, 2.0], [-1.0, 0.0]], [[1.0, 4.0]] * 2)])
    swap_scale = np.array([[0.0, 2.0], [1.0, 0.0]])
    assert np.allclose(transform_means(am, swap_scale).pdfs[0].means, [[4.0, 1.0], [0.0, -1.0]])
    affine = np.array([[1.0, 0.0, 10.0], [0.0, 1.0, -1.0]])
    moved = transform_means(am, affine).pdfs[0]
    assert np.allclose(moved.means, [[11.0, 1.0], [9.0, -1.0]])
    assert np.allclose(moved.variances, am.pdfs[0].variances)
    assert np.allclose(moved.weights, am.pdfs[0].weights)
    # gconsts follow the new means: log(0.25) - log(2 pi) - 0.5 log 4 - 0.5 (121 + 1/4)
    assert np.isclose(moved.gconsts[0],
                      np.log(0.25) - np.log(2 * np.pi) - 0.5 * np.log(4.0) - 0.5 * 121.25,
                      rtol=1e-6)
    with pytest.raises(AsrdistError, match="3x2 transform for a model of dimension 2"):
        transform_means(am, np.ones((3, 2)))


def test_khg_means_move_as_the_numpy_ones() -> None:
    rng = np.random.default_rng(4)
    am = _random_am(rng, 3, (2, 3))
    matrix = rng.normal(size=(3, 4))
    khg_am = to_khg_am_diag_gmm(am)
    transform_khg_means(khg_am, matrix)
    got, want = am_params_from_khg(khg_am), transform_means(am, matrix)
    for g, w in zip(got.pdfs, want.pdfs, strict=True):
        assert np.allclose(g.means, w.means, atol=1e-5)
        assert np.allclose(g.gconsts, w.gconsts, rtol=1e-5, atol=1e-4)


def test_compose_transforms_applies_b_first_as_kaldi() -> None:
    a = np.array([[1.0, 2.0], [0.0, 1.0]])
    b = np.array([[1.0, 0.0, 1.0], [2.0, 1.0, 0.0]])  # 3-D to 2-D
    x = np.array([1.0, -1.0, 2.0])
    assert np.allclose(compose_transforms(a, b) @ x, a @ (b @ x))
    a_affine = np.hstack([a, [[5.0], [-3.0]]])
    # a affine, b linear: x -> a [b x; 1], so the result is affine in x
    c = compose_transforms(a_affine, b)
    assert c.shape == (2, 4) and np.allclose(c @ np.append(x, 1.0), a_affine @ np.append(b @ x, 1))
    # both affine (--b-is-affine): b's last column is its offset
    b_affine = np.array([[1.0, 0.0, 1.0], [0.0, 2.0, -1.0]])  # 2-D to 2-D plus offset
    y = np.array([3.0, 4.0])
    c = compose_transforms(a_affine, b_affine, b_is_affine=True)
    assert np.allclose(c @ np.append(y, 1.0),
                       a_affine @ np.append(b_affine @ np.append(y, 1.0), 1.0))
    with pytest.raises(AsrdistError, match="a has 2 columns, b has 4 rows"):
        compose_transforms(a, np.ones((4, 2)))


def test_too_little_data_and_mismatched_statistics_are_errors() -> None:
    stats = MlltStats.zeros(3)
    stats.beta = 5.0
    with pytest.raises(AsrdistError, match="5 frames are too few for a 3x3 transform"):
        estimate_mllt(stats)
    with pytest.raises(AsrdistError, match="cannot be summed"):
        stats + MlltStats.zeros(2)
    am = AmDiagGmmParams(1, [_gmm([1.0], [[0.0]], [[1.0]])])
    with pytest.raises(AsrdistError, match="pdf-id 3 outside"):
        MlltStats.zeros(1).accumulate(am, np.zeros((1, 1)), np.array([3]))
