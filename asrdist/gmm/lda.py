"""LDA on spliced frames (the first step of Kaldi's steps/train_lda_mllt.sh), and ``.mat`` I/O.

Which Kaldi program each piece mirrors:

- :meth:`LdaStats.accumulate`: ``acc-lda`` (LdaEstimate::Accumulate) on
  ``splice-feats`` output (:func:`asrdist.kaldi.gmm_feats.splice_frames`), with the class of
  a frame its aligned pdf-id and its weight 0 on silence (``weight-silence-post 0.0``);
- :meth:`LdaStats.estimate`: ``est-lda`` (LdaEstimate::Estimate), ``--dim``,
  ``--allow-large-dim``, ``--remove-offset`` and what ``--write-full-matrix`` writes;
- :func:`write_matrix` / :func:`read_matrix`: a ``Matrix<float>`` file (``0.mat``,
  ``final.mat``) as Kaldi's WriteKaldiObject / ReadKaldiObject.

Applying a matrix (``transform-feats``, affine when it has one column more than the input)
is :class:`asrdist.kaldi.gmm_feats.FeatureTransform`, which GMM training and decoding share.
Kaldi's ``--rand-prune`` (random subsampling of frames for speed) is left out: these
statistics are exact, as Kaldi's with ``--rand-prune=0``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from asrdist.errors import AsrdistError
from asrdist.fsutil import write_atomically
from asrdist.kaldi.io_funcs import KaldiReader, KaldiWriter


@dataclass
class LdaStats:
    """Per-class counts and sums plus the total scatter of the frames (LdaEstimate's
    accumulators), in float64; ``+`` sums those of parallel jobs."""

    occ: np.ndarray  # (num_classes,) weighted frame count per class (pdf-id)
    first: np.ndarray  # (num_classes, dim) weighted sum of frames per class
    second: np.ndarray  # (dim, dim) weighted sum of x x^T over all frames

    @classmethod
    def zeros(cls, num_classes: int, dim: int) -> LdaStats:
        return cls(np.zeros(num_classes), np.zeros((num_classes, dim)), np.zeros((dim, dim)))

    @property
    def dim(self) -> int:
        return self.first.shape[1]

    @property
    def num_classes(self) -> int:
        return self.first.shape[0]

    def __add__(self, other: LdaStats) -> LdaStats:
        if other.first.shape != self.first.shape:
            raise AsrdistError(f"LDA statistics of {self.num_classes} classes x dim {self.dim} "
                               f"and {other.num_classes} x {other.dim} cannot be summed")
        return LdaStats(self.occ + other.occ, self.first + other.first,
                        self.second + other.second)

    def accumulate(self, feats: np.ndarray, classes: np.ndarray,
                   weights: np.ndarray | None = None) -> None:
        """Add one utterance's (spliced) frames, frame t of class ``classes[t]`` with weight
        ``weights[t]`` (1 when None; 0 drops the frame, as silence in train_lda_mllt.sh)."""
        x = np.asarray(feats, dtype=np.float64)
        classes = np.asarray(classes)
        if x.ndim != 2 or x.shape[1] != self.dim or classes.shape != (x.shape[0],):
            raise AsrdistError(f"LDA accumulation: {x.shape} frames with {classes.shape} "
                               f"class labels, statistics of dimension {self.dim}")
        if classes.size and (classes.min() < 0 or classes.max() >= self.num_classes):
            raise AsrdistError(f"LDA accumulation: class id {int(classes.max())} outside "
                               f"0..{self.num_classes - 1}")
        w = np.ones(x.shape[0]) if weights is None else np.asarray(weights, dtype=np.float64)
        weighted = w[:, None] * x
        self.occ += np.bincount(classes, weights=w, minlength=self.num_classes)
        order = np.argsort(classes, kind="stable")
        starts = np.flatnonzero(np.diff(classes[order], prepend=-1))
        if order.size:  # per-class sums of the class-sorted frames
            self.first[classes[order][starts]] += np.add.reduceat(weighted[order], starts)
        self.second += weighted.T @ x

    def estimate(self, dim: int = 40, remove_offset: bool = False,
                 allow_large_dim: bool = False) -> LdaResult:
        """est-lda: the rows of the returned matrix are the directions maximising between-
        over within-class variance, scaled so that the projected within-class covariance is
        the identity, ordered by decreasing between-class variance."""
        if not 0 < dim <= self.dim:
            raise AsrdistError(f"est-lda --dim={dim}: must be in 1..{self.dim}, "
                               "the dimension of the statistics")
        if dim >= self.num_classes and not allow_large_dim:
            raise AsrdistError(f"est-lda --dim={dim}: not below the {self.num_classes} classes "
                               "(the between-class scatter has rank < classes); "
                               "pass allow_large_dim (--allow-large-dim) to force it")
        count = float(self.occ.sum())
        if count <= 0.0:
            raise AsrdistError("est-lda: the LDA statistics hold no frames")
        mean = self.first.sum(axis=0) / count
        total_covar = self.second / count - np.outer(mean, mean)
        seen = self.occ != 0.0
        class_means = self.first[seen] / self.occ[seen, None]
        between = (class_means.T * (self.occ[seen] / count)) @ class_means - np.outer(mean, mean)
        within_sqrt_inv = np.linalg.inv(_cholesky_smoothed(total_covar - between))
        # L^-1 B L^-T is symmetric PSD: its SVD (Kaldi's) is its eigendecomposition.
        eigvals, eigvecs = np.linalg.eigh(within_sqrt_inv @ between @ within_sqrt_inv.T)
        order = np.argsort(-np.abs(eigvals), kind="stable")
        singular_values, eigvecs = np.abs(eigvals[order]), eigvecs[:, order]
        # Any sign is as good (Kaldi's comes from its SVD); fix one so runs are reproducible.
        signs = np.sign(eigvecs[np.argmax(np.abs(eigvecs), axis=0), np.arange(self.dim)])
        full = (eigvecs * signs).T @ within_sqrt_inv
        if remove_offset:
            full = np.hstack([full, -(full @ mean)[:, None]])
        return LdaResult(full[:dim], full, singular_values, count)


@dataclass
class LdaResult:
    """est-lda's output: ``matrix`` (``0.mat``, dim rows), ``full_matrix`` (what
    ``--write-full-matrix`` writes: all rows), the singular values it logs (the between-class
    variance of each full-matrix row) and the data count."""

    matrix: np.ndarray
    full_matrix: np.ndarray
    singular_values: np.ndarray
    count: float


def _cholesky_smoothed(covar: np.ndarray) -> np.ndarray:
    """Cholesky factor; on failure retried with 1e-3 times the mean variance added to the
    diagonal, as LdaEstimate::Estimate does for a singular within-class covariance."""
    try:
        return np.linalg.cholesky(covar)
    except np.linalg.LinAlgError:
        smooth = 1.0e-3 * np.trace(covar) / covar.shape[0]
        try:
            return np.linalg.cholesky(covar + smooth * np.eye(covar.shape[0]))
        except np.linalg.LinAlgError:
            raise AsrdistError("est-lda: the within-class covariance is not positive "
                               "definite, even smoothed (too few distinct frames?)") from None


def write_matrix(path: str | os.PathLike, matrix: np.ndarray) -> None:
    """Write ``matrix`` atomically as Kaldi's binary ``Matrix<float>`` (``est-lda 0.mat``,
    ``final.mat``): ``\\0B``, ``FM``, rows, columns, row-major float32."""
    matrix = np.asarray(matrix)
    if matrix.ndim != 2:
        raise AsrdistError(f"{path}: a transform must be a 2-D matrix, got shape {matrix.shape}")
    writer = KaldiWriter(binary=True)
    writer.write_float_matrix(matrix)
    write_atomically(path, lambda f: f.write(writer.getvalue()), "transform matrix")


def read_matrix(path: str | os.PathLike) -> np.ndarray:
    """A Kaldi ``Matrix`` file (binary or text, float or double) as float64."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as e:
        raise AsrdistError(f"{path}: cannot read the transform matrix: {e.strerror}") from e
    reader = KaldiReader(data, str(path))
    matrix = reader.read_float_matrix().astype(np.float64)
    if not reader.at_end():
        raise reader.fail("trailing data after the matrix")
    return matrix
