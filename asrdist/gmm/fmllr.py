"""Feature-space MLLR (constrained MLLR): one affine transform per speaker (Kaldi's
gmm-est-fmllr with ``--fmllr-update-type=full``, Gales 1998).

A speaker's frames x are mapped to ``W [x; 1]`` (``W = [A b]``, d x (d+1)) so that the
model's diagonal Gaussians fit them best. The statistics are those of Kaldi's
FmllrDiagGmmAccs: the count ``beta``, ``K = sum g (mu / var) [x; 1]^T`` and, per dimension i,
``G_i = sum g / var_i [x; 1][x; 1]^T``, with g the Gaussian posteriors within each frame's
aligned pdf. The auxiliary function ``beta log|det A| + sum_i (w_i k_i - w_i G_i w_i^T / 2)``
is maximised row by row (each row's optimum is a quadratic in one scalar, the better root
kept), from the identity, as Kaldi's ComputeFmllrMatrixDiagGmmFull does. Speakers whose frames
are too few keep the identity.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np

from asrdist.gmm.stats import gaussian_log_likes
from asrdist.kaldi.am_gmm import AmDiagGmmParams

log = logging.getLogger(__name__)


_ROWS = 4096  # frames whose outer products are formed at once (4096 x (d+1)^2 floats)


def _scatter(post: np.ndarray, ext: np.ndarray) -> np.ndarray:
    """Per Gaussian m, ``sum_t post[t, m] ext_t ext_t^T`` flattened: G_i is then these
    weighted by the Gaussians' inverse variances in dimension i, a product with as many
    rows as Gaussians (a pdf holds a few) instead of one per dimension."""
    out = np.zeros((post.shape[1], ext.shape[1] ** 2))
    for lo in range(0, len(ext), _ROWS):
        e = ext[lo:lo + _ROWS]
        out += post[lo:lo + _ROWS].T @ (e[:, :, None] * e[:, None, :]).reshape(len(e), -1)
    return out


@dataclass
class FmllrStats:
    """One speaker's fMLLR statistics; ``+`` sums those of jobs holding the same speaker."""

    beta: float
    k: np.ndarray  # (d, d+1)
    g: np.ndarray  # (d, d+1, d+1)

    @classmethod
    def zeros(cls, dim: int) -> FmllrStats:
        return cls(0.0, np.zeros((dim, dim + 1)), np.zeros((dim, dim + 1, dim + 1)))

    def __add__(self, other: FmllrStats) -> FmllrStats:
        return FmllrStats(self.beta + other.beta, self.k + other.k, self.g + other.g)

    def accumulate(self, am: AmDiagGmmParams, feats: np.ndarray, pdfs: np.ndarray,
                   weights: np.ndarray) -> None:
        """Add frames aligned to ``pdfs``, each counted ``weights`` (silence 0 or 0.01)."""
        keep = weights > 0
        feats, pdfs, weights = feats[keep], pdfs[keep], weights[keep]
        order = np.argsort(pdfs, kind="stable")
        bounds = np.flatnonzero(np.diff(pdfs[order])) + 1
        for rows in np.split(order, bounds) if len(order) else []:
            pdf = am.pdfs[int(pdfs[rows[0]])]
            x = feats[rows].astype(np.float64)
            ll = gaussian_log_likes(pdf, x)
            post = np.exp(ll - ll.max(axis=1, keepdims=True))
            post *= (weights[rows] / post.sum(axis=1))[:, None]
            ext = np.hstack([x, np.ones((len(rows), 1))])
            self.beta += float(post.sum())
            self.k += pdf.means_invvars.astype(np.float64).T @ (post.T @ ext)
            self.g += (pdf.inv_vars.astype(np.float64).T @ _scatter(post, ext)).reshape(
                self.g.shape)

    def objective(self, w: np.ndarray) -> float:
        """The auxiliary function at ``w`` (its change is what the transform gains)."""
        sign, logdet = np.linalg.slogdet(w[:, :-1])
        if sign == 0:
            return -np.inf
        quad = np.einsum("ij,ijk,ik->", w, self.g, w)
        return self.beta * logdet + float(np.sum(w * self.k)) - 0.5 * quad

    def estimate(self, num_iters: int = 40, min_count: float = 20.0) -> tuple[np.ndarray, float]:
        """The transform ``W`` and its gain per frame; the identity below ``min_count``."""
        dim = self.k.shape[0]
        w = np.hstack([np.eye(dim), np.zeros((dim, 1))])
        if self.beta < min_count:
            return w, 0.0
        start = self.objective(w)
        g_inv = np.linalg.inv(self.g)
        for _ in range(num_iters):
            for i in range(dim):
                w[i] = self._best_row(w, i, g_inv[i])
        return w, (self.objective(w) - start) / self.beta

    def _best_row(self, w: np.ndarray, i: int, g_inv: np.ndarray) -> np.ndarray:
        """Row i at its optimum with the others fixed: ``(alpha c + k_i) G_i^-1``, c the
        row's cofactor direction, alpha the root of ``e1 a^2 + e2 a - beta`` that scores
        better on ``beta log|a e1 + e2| - a^2 e1 / 2``."""
        cof = np.append(np.linalg.inv(w[:, :-1])[:, i], 0.0)
        tmp = g_inv @ cof
        e1, e2 = float(cof @ tmp), float(self.k[i] @ tmp)
        root = np.sqrt(e2 * e2 + 4.0 * e1 * self.beta)
        alphas = ((-e2 + root) / (2 * e1), (-e2 - root) / (2 * e1))
        best = max(alphas, key=lambda a: self.beta * np.log(abs(a * e1 + e2)) - 0.5 * a * a * e1)
        return (best * cof + self.k[i]) @ g_inv


def compose(new: np.ndarray, old: np.ndarray) -> np.ndarray:
    """compose-transforms --b-is-affine: ``new`` applied after ``old``, as one d x (d+1)."""
    return np.hstack([new[:, :-1] @ old[:, :-1], (new[:, :-1] @ old[:, -1] + new[:, -1])[:, None]])
