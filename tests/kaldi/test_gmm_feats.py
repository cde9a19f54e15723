"""The GMM features: Kaldi's add-deltas, splice-feats and transform-feats."""

from __future__ import annotations

import kaldiio
import numpy as np
import pytest

from asrdist.errors import AsrdistError
from asrdist.kaldi.gmm_feats import FeatureTransform, add_deltas, splice_frames


def test_add_deltas_on_a_quadratic() -> None:
    t = np.arange(20, dtype=np.float32)
    out = add_deltas(np.stack([t * t, t], axis=1))
    assert out.shape == (20, 6)
    inner = slice(4, 16)  # frames whose 9-frame window does not reach an edge
    assert np.allclose(out[inner, 0], t[inner] ** 2)
    assert np.allclose(out[inner, 2], 2 * t[inner], atol=1e-3)  # d/dt t^2
    assert np.allclose(out[inner, 4], 2.0, atol=1e-3)  # d2/dt2 t^2
    assert np.allclose(out[inner, 3], 1.0) and np.allclose(out[inner, 5], 0.0, atol=1e-5)
    # edges repeat the first/last frame, as Kaldi does: constant input gives zero deltas
    flat = add_deltas(np.ones((3, 2), dtype=np.float32))
    assert np.allclose(flat[:, 2:], 0.0)


def test_splice_repeats_the_edge_frames_as_splice_feats() -> None:
    feats = np.array([[1.0], [2.0], [3.0]])
    # by hand: frame 0 sees frames -1 (repeated 0), 0, 1; frame 2 sees 1, 2, 3 (repeated 2)
    assert splice_frames(feats, 1, 1).tolist() == [[1, 1, 2], [1, 2, 3], [2, 3, 3]]
    assert splice_frames(feats, 0, 2).tolist() == [[1, 2, 3], [2, 3, 3], [3, 3, 3]]


def test_a_transform_is_linear_or_affine_as_transform_feats(tmp_path) -> None:
    cmn = np.array([[1.0, 2.0], [3.0, 4.0]])
    linear = FeatureTransform(np.array([[1.0, 0, 0, 0, 0, -1.0]]), left=1, right=1)
    # frame 0 spliced: [1 2 1 2 3 4]; first minus last element
    assert linear.apply(cmn)[:, 0].tolist() == [1 - 4, 1 - 4]
    affine = FeatureTransform(np.array([[0, 0, 1.0, 0, 0, 0, 10.0]]), left=1, right=1)
    assert affine.apply(cmn)[:, 0].tolist() == [11.0, 13.0]
    with pytest.raises(AsrdistError, match="2x3 but the spliced features have dimension 6"):
        FeatureTransform(np.ones((2, 3)), left=1, right=1).apply(cmn)
    assert FeatureTransform.of_model_dir(tmp_path).matrix is None  # no final.mat: deltas
    kaldiio.save_mat(str(tmp_path / "final.mat"), np.eye(2, 7))
    (tmp_path / "splice_opts").write_text("--left-context=2 --right-context=1\n")
    read = FeatureTransform.of_model_dir(tmp_path)
    assert (read.left, read.right) == (2, 1) and np.array_equal(read.matrix, np.eye(2, 7))
    (tmp_path / "final.mat").write_text("garbage")
    with pytest.raises(AsrdistError, match="final.mat: not a Kaldi matrix"):
        FeatureTransform.of_model_dir(tmp_path)


def test_splice_only_gives_the_spliced_frames() -> None:
    cmn = np.array([[1.0], [2.0]])
    assert FeatureTransform(left=1, right=0, splice_only=True).apply(cmn).tolist() == [
        [1, 1], [1, 2]]
