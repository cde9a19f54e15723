"""MLLT (global semi-tied covariance) for diagonal GMMs, as steps/train_lda_mllt.sh runs it.

Which Kaldi program each piece mirrors:

- :meth:`MlltStats.accumulate`: ``gmm-acc-mllt`` (MlltAccs::AccumulateFromGmm) with
  ``--rand-prune=0``: frames in the current feature space, each with its aligned pdf-id and a
  weight (0 on silence: ``weight-silence-post 0.0``), Gaussian posteriors under that pdf;
- :func:`estimate_mllt`: ``est-mllt`` (MlltAccs::Update), Gales' row-by-row update from the
  unit matrix;
- :func:`transform_means` / :func:`transform_khg_means`: ``gmm-transform-means``;
- :func:`compose_transforms`: ``compose-transforms`` (``MLLT o LDA`` is
  ``compose_transforms(mllt, lda)``).

With A the transform and a_i its rows, the auxiliary function is
``beta log|det A| - 1/2 sum_i a_i^T G_i a_i``, where beta is the frame count and
``G_i = sum_{t,m} gamma_tm (x_t - mu_m)(x_t - mu_m)^T / sigma^2_{m,i}``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from asrdist.errors import AsrdistError
from asrdist.gmm.stats import gaussian_log_likes
from asrdist.kaldi.am_gmm import AmDiagGmmParams, DiagGmmParams, compute_gconsts

if TYPE_CHECKING:
    import kaldi_hmm_gmm as khg


@dataclass
class MlltStats:
    """MlltAccs in float64: ``beta`` (weighted frames) and ``g[i]`` = G_i; ``+`` sums those of
    parallel jobs. ``log_like`` is gmm-acc-mllt's logged GMM log-likelihood (weighted)."""

    beta: float
    g: np.ndarray  # (dim, dim, dim)
    log_like: float = 0.0

    @classmethod
    def zeros(cls, dim: int) -> MlltStats:
        return cls(0.0, np.zeros((dim, dim, dim)))

    @property
    def dim(self) -> int:
        return self.g.shape[0]

    def __add__(self, other: MlltStats) -> MlltStats:
        if other.g.shape != self.g.shape:
            raise AsrdistError(f"MLLT statistics of dimension {self.dim} and {other.dim} "
                               "cannot be summed")
        return MlltStats(self.beta + other.beta, self.g + other.g,
                         self.log_like + other.log_like)

    def accumulate(self, am: AmDiagGmmParams, feats: np.ndarray, pdfs: np.ndarray,
                   weights: np.ndarray | None = None) -> None:
        """Add one utterance: frame t aligned to pdf ``pdfs[t]`` with weight ``weights[t]``
        (1 when None; 0 drops it). Frames are grouped by pdf, and each Gaussian's scatter
        around its mean is formed from weighted sums, one matrix product per pdf."""
        x = np.asarray(feats, dtype=np.float64)
        pdfs = np.asarray(pdfs)
        if x.ndim != 2 or x.shape[1] != self.dim or pdfs.shape != (x.shape[0],):
            raise AsrdistError(f"MLLT accumulation: {x.shape} frames with {pdfs.shape} pdf-ids, "
                               f"statistics of dimension {self.dim}")
        if am.dim != self.dim:
            raise AsrdistError(f"MLLT accumulation: the model has dimension {am.dim}, the "
                               f"statistics {self.dim}")
        if pdfs.size and (pdfs.min() < 0 or pdfs.max() >= am.num_pdfs):
            raise AsrdistError(f"MLLT accumulation: pdf-id {int(pdfs.max())} outside the "
                               f"model's 0..{am.num_pdfs - 1}")
        w = np.ones(x.shape[0]) if weights is None else np.asarray(weights, dtype=np.float64)
        keep = w != 0.0
        x, pdfs, w = x[keep], pdfs[keep], w[keep]
        order = np.argsort(pdfs, kind="stable")
        bounds = np.flatnonzero(np.diff(pdfs[order])) + 1
        for rows in np.split(order, bounds) if order.size else []:
            self._add_pdf(am.pdfs[int(pdfs[rows[0]])], x[rows], w[rows])

    def _add_pdf(self, pdf: DiagGmmParams, x: np.ndarray, w: np.ndarray) -> None:
        ll = gaussian_log_likes(pdf, x)
        top = ll.max(axis=1, keepdims=True)
        post = np.exp(ll - top)
        total = post.sum(axis=1, keepdims=True)
        self.log_like += float(w @ (top + np.log(total))[:, 0])
        post *= (w[:, None] / total)  # (frames, gauss): weighted Gaussian posteriors
        occ = post.sum(axis=0)
        sums = post.T @ x  # (gauss, dim)
        frames, gauss = post.shape
        # Per Gaussian sum_t post x x^T, as one product of (frames, gauss*dim) by (frames, dim).
        outer = ((post[:, :, None] * x[:, None, :]).reshape(frames, -1).T @ x)
        outer = outer.reshape(gauss, self.dim, self.dim)
        mean = pdf.means.astype(np.float64)
        cross = mean[:, :, None] * sums[:, None, :]
        scatter = (outer - cross - cross.transpose(0, 2, 1)
                   + occ[:, None, None] * mean[:, :, None] * mean[:, None, :])
        inv_vars = pdf.inv_vars.astype(np.float64)
        self.g += (inv_vars.T @ scatter.reshape(gauss, -1)).reshape(self.dim, self.dim, self.dim)
        self.beta += float(occ.sum())


@dataclass
class MlltResult:
    """est-mllt's output: the transform, its objective improvement per frame over the unit
    matrix (the figure est-mllt logs), the count, and the auxiliary function after each
    pass (a check that it never falls)."""

    matrix: np.ndarray
    objf_impr_per_frame: float
    count: float
    objf_per_iter: list[float]


def mllt_objective(stats: MlltStats, matrix: np.ndarray) -> float:
    """``beta log|det A| - 1/2 sum_i a_i^T G_i a_i`` (per frame)."""
    quad = np.einsum("ia,iab,ib->", matrix, stats.g, matrix)
    return (stats.beta * np.linalg.slogdet(matrix)[1] - 0.5 * quad) / stats.beta


def estimate_mllt(stats: MlltStats, num_iters: int = 200) -> MlltResult:
    """est-mllt: starting from the unit matrix, ``num_iters`` passes over the rows, each row
    set to its exact maximiser given the others (Gales 1999, eq. 22):
    ``a_i = G_i^-1 c_i sqrt(beta / c_i^T G_i^-1 c_i)``, c_i the i-th row of A^-T."""
    dim = stats.dim
    if stats.beta <= 2 * dim:  # Kaldi only warns; its inverses fail on fewer frames anyway
        raise AsrdistError(f"est-mllt: {stats.beta:g} frames are too few for a "
                           f"{dim}x{dim} transform")
    try:
        g_inv = np.linalg.inv(stats.g)
    except np.linalg.LinAlgError:
        raise AsrdistError("est-mllt: a G_i statistic is singular (too few distinct frames?)"
                           ) from None
    matrix = np.eye(dim)
    start = mllt_objective(stats, matrix)
    objf = []
    for _ in range(num_iters):
        for i in range(dim):
            cofactor = np.linalg.inv(matrix)[:, i]  # i-th row of A^-T
            direction = g_inv[i] @ cofactor
            matrix[i] = direction * np.sqrt(stats.beta / (cofactor @ direction))
        objf.append(mllt_objective(stats, matrix))
    return MlltResult(matrix, objf[-1] - start if objf else 0.0, stats.beta, objf)


def compose_transforms(a: np.ndarray, b: np.ndarray, b_is_affine: bool = False) -> np.ndarray:
    """compose-transforms: the transform applying ``b`` first, then ``a`` (A B). An affine
    ``a`` (one column more than ``b`` has rows) is composed with b extended by a unit row
    (``b_is_affine``: b's last column is an offset) or a unit row and column."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if a.shape[1] == b.shape[0]:
        return a @ b
    if a.shape[1] != b.shape[0] + 1:
        raise AsrdistError(f"compose-transforms: a has {a.shape[1]} columns, b has "
                           f"{b.shape[0]} rows")
    unit = np.zeros((1, b.shape[1] if b_is_affine else b.shape[1] + 1))
    unit[0, -1] = 1.0
    b_ext = np.vstack([b if b_is_affine else np.hstack([b, np.zeros((b.shape[0], 1))]), unit])
    return a @ b_ext


def transform_means(am: AmDiagGmmParams, matrix: np.ndarray) -> AmDiagGmmParams:
    """gmm-transform-means: every mean mu becomes A mu (A [mu; 1] when ``matrix`` is affine),
    variances and weights kept, so the model scores transformed features as before up to
    log|det A|."""
    linear, offset = _split_affine(matrix, am.dim)
    pdfs = []
    for pdf in am.pdfs:
        means = pdf.means.astype(np.float64) @ linear.T + offset
        means_invvars = (means * pdf.inv_vars).astype(np.float32)
        pdfs.append(DiagGmmParams(compute_gconsts(pdf.weights, means_invvars, pdf.inv_vars),
                                  pdf.weights.copy(), means_invvars, pdf.inv_vars.copy()))
    return AmDiagGmmParams(am.dim, pdfs)


def transform_khg_means(am: khg.AmDiagGmm, matrix: np.ndarray) -> None:
    """gmm-transform-means on a khg model, in place (gconsts recomputed)."""
    linear, offset = _split_affine(matrix, am.dim)
    for i in range(am.num_pdfs):
        pdf = am.get_pdf(i)  # a reference into ``am``
        means = np.asarray(pdf.means, dtype=np.float64) @ linear.T + offset
        pdf.set_means(means.astype(np.float32))
    am.compute_gconsts()


def _split_affine(matrix: np.ndarray, dim: int) -> tuple[np.ndarray, np.ndarray]:
    matrix = np.asarray(matrix, dtype=np.float64)
    if matrix.shape[0] != dim or matrix.shape[1] not in (dim, dim + 1):
        raise AsrdistError(f"gmm-transform-means: a {matrix.shape[0]}x{matrix.shape[1]} "
                           f"transform for a model of dimension {dim} (need {dim}x{dim} "
                           f"or {dim}x{dim + 1})")
    if matrix.shape[1] == dim:
        return matrix, np.zeros(dim)
    return matrix[:, :dim], matrix[:, dim]
