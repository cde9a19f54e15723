"""LDA as est-lda computes it, checked against closed forms; Kaldi matrix files."""

from __future__ import annotations

import struct

import kaldiio
import numpy as np
import pytest

from asrdist.errors import AsrdistError
from asrdist.gmm.lda import LdaStats, read_matrix, write_matrix
from asrdist.gmm.mllt import compose_transforms
from asrdist.kaldi.gmm_feats import FeatureTransform, splice_frames

# Two classes in 2-D sharing the within-class covariance W = [[2, 1], [1, 2]] exactly, with
# means c +- (1, 0): each class is its mean +- sqrt(2) times W's Cholesky columns, four points
# whose (population) covariance is W.
W = np.array([[2.0, 1.0], [1.0, 2.0]])
CENTRE = np.array([0.5, -1.5])


def _two_classes() -> tuple[np.ndarray, np.ndarray]:
    chol = np.array([[np.sqrt(2.0), 0.0], [1 / np.sqrt(2.0), np.sqrt(1.5)]])
    offsets = np.sqrt(2.0) * np.concatenate([chol.T, -chol.T])
    feats = np.concatenate([CENTRE + [1.0, 0.0] + offsets, CENTRE - [1.0, 0.0] + offsets])
    return feats, np.repeat([0, 1], 4)


def _stats(feats: np.ndarray, classes: np.ndarray, num_classes: int = 2) -> LdaStats:
    stats = LdaStats.zeros(num_classes, feats.shape[1])
    stats.accumulate(feats, classes)
    return stats


def _same_up_to_sign(got: np.ndarray, want: np.ndarray) -> bool:
    return np.allclose(got, want, atol=1e-10) or np.allclose(got, -want, atol=1e-10)


def test_two_class_direction_is_fisher_scaled_to_unit_within_class_variance() -> None:
    # By hand: delta = mu0 - mu1 = (2, 0); W^-1 delta = (4/3, -2/3); delta^T W^-1 delta = 8/3.
    # The LDA row is W^-1 delta / sqrt(8/3) (so that w^T W w = 1); B = delta delta^T / 4, so
    # its between-class variance is (8/3) / 4 = 2/3. The other row is orthogonal to delta
    # (no between-class variance): (0, 1) scaled to w^T W w = 1, i.e. (0, 1/sqrt 2).
    fisher = np.array([4 / 3, -2 / 3]) / np.sqrt(8 / 3)
    result = _stats(*_two_classes()).estimate(dim=1)
    assert result.matrix.shape == (1, 2)
    assert _same_up_to_sign(result.matrix[0], fisher)
    assert np.allclose(result.singular_values, [2 / 3, 0.0], atol=1e-12)
    assert result.count == 8.0
    assert _same_up_to_sign(result.full_matrix[1], np.array([0.0, 1 / np.sqrt(2.0)]))
    assert np.allclose(result.full_matrix[:1], result.matrix)
    full = _stats(*_two_classes()).estimate(dim=2, allow_large_dim=True)
    assert full.matrix.shape == (2, 2) and np.allclose(full.matrix, full.full_matrix)


def test_remove_offset_appends_minus_the_projected_total_mean() -> None:
    plain = _stats(*_two_classes()).estimate(dim=1)
    affine = _stats(*_two_classes()).estimate(dim=1, remove_offset=True)
    assert affine.matrix.shape == (1, 3) and affine.full_matrix.shape == (2, 3)
    assert np.allclose(affine.matrix[:, :2], plain.matrix)
    # the total mean is CENTRE (equal classes around it): the offset is -w . CENTRE
    assert np.isclose(affine.matrix[0, 2], -(plain.matrix[0] @ CENTRE))


def test_projection_whitens_within_class_and_sorts_between_class_variance() -> None:
    rng = np.random.default_rng(0)
    num_classes, dim, per_class = 6, 4, 50
    means = rng.normal(scale=3.0, size=(num_classes, dim))
    mixing = rng.normal(size=(dim, dim))
    classes = np.repeat(np.arange(num_classes), per_class)
    feats = means[classes] + rng.normal(size=(classes.size, dim)) @ mixing
    result = _stats(feats, classes, num_classes).estimate(dim=3)
    # Definition of the LDA solution: projected within-class covariance = I, between-class
    # covariance diagonal with the (decreasing) singular values on its diagonal.
    y = feats @ result.full_matrix.T
    class_means = np.stack([y[classes == c].mean(axis=0) for c in range(num_classes)])
    within = sum(np.cov(y[classes == c].T, bias=True) for c in range(num_classes)) / num_classes
    between = np.cov(class_means.T, bias=True)
    assert np.allclose(within, np.eye(dim), atol=1e-9)
    assert np.allclose(between, np.diag(result.singular_values), atol=1e-9)
    assert np.all(np.diff(result.singular_values) <= 0)
    assert np.allclose(result.matrix, result.full_matrix[:3])


def test_statistics_of_jobs_sum_and_zero_weight_drops_frames() -> None:
    feats, classes = _two_classes()
    whole = _stats(feats, classes)
    first, second = LdaStats.zeros(2, 2), LdaStats.zeros(2, 2)
    first.accumulate(feats[:3], classes[:3])
    second.accumulate(feats[3:], classes[3:])
    summed = first + second
    assert np.allclose(summed.occ, whole.occ) and np.allclose(summed.first, whole.first)
    assert np.allclose(summed.second, whole.second)
    # a silence frame (weight 0) far away changes nothing
    padded = LdaStats.zeros(2, 2)
    padded.accumulate(np.vstack([feats, [[100.0, -50.0]]]), np.append(classes, 1),
                      weights=np.append(np.ones(8), 0.0))
    assert np.allclose(padded.estimate(dim=1).matrix, whole.estimate(dim=1).matrix)
    assert np.allclose(whole.occ, [4.0, 4.0]) and np.allclose(whole.first.sum(axis=0),
                                                              8 * CENTRE)


def test_a_singular_within_class_covariance_is_smoothed_as_kaldi() -> None:
    # Second coordinate constant: W = diag(s, 0), Cholesky fails; Kaldi adds
    # 1e-3 * trace(W) / dim = 1e-3 * s / 2 to the diagonal. Class values -1, 1 (class 0) and
    # 3, 5 (class 1): within-class variance s = 1, so the LDA row is (1/sqrt(1 + 5e-4), 0).
    feats = np.array([[-1.0, 7.0], [1.0, 7.0], [3.0, 7.0], [5.0, 7.0]])
    result = _stats(feats, np.array([0, 0, 1, 1])).estimate(dim=1)
    assert _same_up_to_sign(result.matrix[0], np.array([1 / np.sqrt(1 + 5e-4), 0.0]))


def test_bad_dimensions_and_labels_name_the_option() -> None:
    stats = _stats(*_two_classes())
    with pytest.raises(AsrdistError, match="--dim=2: not below the 2 classes"):
        stats.estimate(dim=2)
    with pytest.raises(AsrdistError, match="--dim=3: must be in 1..2"):
        stats.estimate(dim=3, allow_large_dim=True)
    with pytest.raises(AsrdistError, match="no frames"):
        LdaStats.zeros(3, 2).estimate(dim=1)
    with pytest.raises(AsrdistError, match="class id 5 outside 0..1"):
        stats.accumulate(np.zeros((1, 2)), np.array([5]))
    with pytest.raises(AsrdistError, match="cannot be summed"):
        stats + LdaStats.zeros(3, 2)


def test_matrix_file_is_kaldis_binary_matrix(tmp_path) -> None:
    matrix = np.array([[1.0, -2.5, 0.25], [3.0, 0.0, 1e-3]])
    path = tmp_path / "0.mat"
    write_matrix(path, matrix)
    # Matrix<float>::Write in binary, by hand: "\0B", token "FM ", int32 rows, int32 cols
    # (each as size byte 4 + little-endian value), then the row-major float32 data.
    want = (b"\0BFM \x04" + struct.pack("<i", 2) + b"\x04" + struct.pack("<i", 3)
            + matrix.astype("<f4").tobytes())
    assert path.read_bytes() == want
    assert np.array_equal(kaldiio.load_mat(str(path)), matrix.astype(np.float32))
    assert np.array_equal(read_matrix(path), matrix.astype(np.float32))
    assert [p.name for p in tmp_path.iterdir()] == ["0.mat"]  # no temporary left behind
    kaldiio.save_mat(str(tmp_path / "double.mat"), matrix)  # kaldiio writes DM for float64
    assert np.array_equal(read_matrix(tmp_path / "double.mat"), matrix)
    (tmp_path / "bad.mat").write_bytes(b"\0BXX ")
    with pytest.raises(AsrdistError, match="bad.mat: expected a matrix"):
        read_matrix(tmp_path / "bad.mat")
    with pytest.raises(AsrdistError, match="missing.mat: cannot read"):
        read_matrix(tmp_path / "missing.mat")


def test_written_lda_plus_mllt_is_what_the_feature_pipeline_applies(tmp_path) -> None:
    # train_lda_mllt.sh: final.mat = MLLT o LDA, applied by splice-feats | transform-feats.
    rng = np.random.default_rng(5)
    cmn = rng.normal(size=(20, 2))
    spliced = splice_frames(cmn, 1, 1)
    stats = LdaStats.zeros(4, 6)
    stats.accumulate(spliced, np.arange(20) % 4)
    lda = stats.estimate(dim=3, remove_offset=True).matrix
    mllt = np.eye(3) + 0.1 * rng.normal(size=(3, 3))
    write_matrix(tmp_path / "final.mat", compose_transforms(mllt, lda))
    (tmp_path / "splice_opts").write_text("--left-context=1 --right-context=1\n")
    got = FeatureTransform.of_model_dir(tmp_path).apply(cmn)
    want = (spliced @ lda[:, :6].T + lda[:, 6]) @ mllt.T
    assert np.allclose(got, want, atol=1e-4)
