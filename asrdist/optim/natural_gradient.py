"""Kaldi's online natural gradient for one matrix of row vectors (Povey, Zhang & Khudanpur,
arXiv:1410.7455; the specification is the comment in kaldi src/nnet3/natural-gradient-online.h).

The scatter of the rows of X (N x D) is modelled online as a low-rank-plus-identity Fisher
matrix ``F = R^T diag(d) R + rho I`` (R: rank x D with orthonormal rows). Preconditioning
multiplies X by the inverse of the smoothed ``G = F + alpha/D tr(F) I`` through Woodbury:

    beta  = rho (1 + alpha) + alpha/D sum(d)
    e_i   = 1 / (beta / d_i + 1),       W = E^(1/2) R      (the stored state)
    X_hat = X - (X W^T) W  = beta X G^-1
    gamma = sqrt(tr(X X^T) / tr(X_hat X_hat^T))           (so ||gamma X_hat|| = ||X||)

The subspace follows T = eta S + (1 - eta) F (S = X^T X / N, eta = 1 - exp(-N / history))
with one power-iteration step, on every call for the first 10 calls, then every
``update_period`` calls. The R x R algebra (eigendecomposition, floors, re-orthogonalising
by Cholesky when C's condition number passes 1e6) runs in float64 on the CPU, on one
thread, as in Kaldi; the N x D products stay in float32 on X's device, and the traces that
give gamma stay there too (no host sync outside an update call). An affine layer's input
with its bias column, [X, 1], is taken without that matrix being made. Written from the
header's derivation.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch

EPSILON = 1e-10  # absolute floor of rho and d (all-zero input must not break the inverse)
DELTA = 1e-5  # floor of rho and d relative to the largest sqrt(c): bounds roundoff
INITIAL_UPDATES = 10  # calls that always update the subspace before update_period applies
CONDITION_LIMIT = 1e6  # beyond this condition number of C, re-orthogonalise R
ORTHO_TOLERANCE = 1e-3  # largest |R R^T - I| element left alone


def norm_ratio(traces: torch.Tensor) -> torch.Tensor:
    """The product of the gammas = sqrt(tr(X X^T) / tr(X_hat X_hat^T)) of the rows of
    ``traces`` (K x 2: [tr(X X^T), tr(X_hat X_hat^T)] each, as
    :meth:`OnlineNaturalGradient.precondition_traces` gives them); a row with a zero trace
    (all-zero input) counts as gamma 1. A 0-d tensor on the traces' device: no host sync."""
    ok = (traces > 0).all(dim=1)
    return torch.where(ok, traces[:, 0] / traces[:, 1], 1.0).prod().sqrt()


@contextmanager
def single_threaded() -> Iterator[None]:
    """Run the R x R float64 algebra on one thread: an eigendecomposition of 80 x 80 is
    too small to share, and on a machine busy with other jobs two threads made it 50x
    slower than one (each waits at every barrier for the other to be scheduled)."""
    threads = torch.get_num_threads()
    if threads == 1:
        yield
        return
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def orthonormal_start(rank: int, dim: int) -> torch.Tensor:
    """A rank x dim matrix with orthonormal rows and no zero row or column: row r holds
    columns r, r + rank, r + 2 rank, ... (disjoint supports), its first entry heavier so
    that no two rows are alike."""
    start = torch.zeros(rank, dim, dtype=torch.float64)
    for r in range(rank):
        cols = torch.arange(r, dim, rank)
        values = torch.ones(len(cols), dtype=torch.float64)
        values[0] = 1.1
        start[r, cols] = values / values.norm()
    return start


class OnlineNaturalGradient:
    """The online Fisher estimate of one stream of row vectors, and its inverse applied."""

    def __init__(self, rank: int, update_period: int, num_samples_history: float,
                 alpha: float) -> None:
        self.rank, self.update_period = rank, update_period
        self.num_samples_history, self.alpha = num_samples_history, alpha
        self.t = 0  # calls so far
        self.W: torch.Tensor | None = None  # E^(1/2) R, float32 on X's device
        self.d = torch.zeros(0, dtype=torch.float64)  # CPU
        self.rho = 0.0

    # -- the quantities of the derivation ------------------------------------------------------

    def eta(self, n: int) -> float:
        """Forgetting factor for a minibatch of ``n`` rows (capped at 0.9, as Kaldi)."""
        return min(1.0 - math.exp(-n / self.num_samples_history), 0.9)

    def beta(self, d: torch.Tensor, rho: float, dim: int) -> float:
        return rho * (1.0 + self.alpha) + self.alpha * float(d.sum()) / dim

    def e(self, d: torch.Tensor, rho: float, dim: int) -> torch.Tensor:
        """The diagonal of E (float64)."""
        return 1.0 / (self.beta(d, rho, dim) / d + 1.0)

    def fisher(self) -> tuple[torch.Tensor, torch.Tensor, float]:
        """(R, d, rho) of the current estimate, R recovered as E^(-1/2) W (float64, CPU)."""
        assert self.W is not None
        dim = self.W.shape[1]
        r = self.W.double().cpu() / self.e(self.d, self.rho, dim).sqrt()[:, None]
        return r, self.d.clone(), self.rho

    # -- applying ---------------------------------------------------------------------------

    def precondition(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(X_hat, gamma) for the float32 rows ``x`` (N x D); the gradient direction is
        gamma * X_hat. Updates the estimate when this call is an update call."""
        x_hat, _, traces = self.precondition_traces(x)
        return x_hat, norm_ratio(traces[None])

    def precondition_traces(self, x: torch.Tensor, ones_column: bool = False
                            ) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor]:
        """(X_hat, its last column or None, [tr(X X^T), tr(X_hat X_hat^T)]).

        With ``ones_column`` the rows are ``[x, 1]`` (an affine layer's input with the
        column of its bias) without that matrix being made: X_hat comes as its first D
        columns (contiguous, for the weight gradient's product) and its last column. The
        traces give gamma (:func:`norm_ratio`), left as one tensor so that a caller with
        several preconditioners makes all their gammas in one go."""
        n = x.shape[0]
        dim = x.shape[1] + ones_column
        flat = x.reshape(-1)
        tr_xx = flat.dot(flat) + n if ones_column else flat.dot(flat)
        if dim == 1 or min(self.rank, dim - 1) == 0:
            last = x.new_ones(n) if ones_column else None
            return x, last, torch.stack([tr_xx, tr_xx])
        if self.t == 0:
            self._initialise(x, ones_column, tr_xx)
        updating = self.t <= INITIAL_UPDATES or (self.t - INITIAL_UPDATES) % self.update_period == 0
        x_hat, last = self._apply(x, ones_column, tr_xx, updating)
        self.t += 1
        flat_hat = x_hat.reshape(-1)
        tr_hat = flat_hat.dot(flat_hat) if last is None else flat_hat.dot(flat_hat) + last.dot(last)
        return x_hat, last, torch.stack([tr_xx, tr_hat])

    def _initialise(self, x0: torch.Tensor, ones_column: bool, tr_xx: torch.Tensor) -> None:
        """Kaldi's start: a fixed orthonormal R with tiny d and rho, then 3 update steps on
        the first minibatch (1 when it has no more rows than the rank)."""
        dim = x0.shape[1] + ones_column
        self.rank = min(self.rank, dim - 1)
        self.rho = EPSILON
        self.d = torch.full((self.rank,), EPSILON, dtype=torch.float64)
        e0 = 1.0 / (2.0 + (dim + self.rank) * self.alpha / dim)
        self.W = (orthonormal_start(self.rank, dim) * math.sqrt(e0)).float().to(x0.device)
        for _ in range(1 if x0.shape[0] <= self.rank else 3):
            self._apply(x0, ones_column, tr_xx, updating=True)

    def _apply(self, x: torch.Tensor, ones_column: bool, tr_xx: torch.Tensor,
               updating: bool) -> tuple[torch.Tensor, torch.Tensor | None]:
        """X_hat = X - X W^T W (as its first columns and last one when X is [x, 1]); on an
        update call also the step W, d, rho -> t+1."""
        assert self.W is not None
        w = self.W
        if ones_column:
            w_x, w_1 = w[:, :-1], w[:, -1]
            h = torch.addmm(w_1, x, w_x.T)  # [x, 1] W^T
            x_hat, last = torch.addmm(x, h, w_x, alpha=-1.0), 1.0 - h @ w_1
        else:
            h = x @ w.T
            x_hat, last = torch.addmm(x, h, w, alpha=-1.0), None
        if updating:
            j = h.T @ x  # J = H^T X, R x D
            if ones_column:
                j = torch.cat([j, h.sum(dim=0)[:, None]], dim=1)
            self._update(x.shape[0], h, j, tr_xx)
        return x_hat, last

    def _update(self, n: int, h: torch.Tensor, j: torch.Tensor, tr_xx: torch.Tensor) -> None:
        """W, d, rho -> t+1 from H = X W^T and J = H^T X."""
        assert self.W is not None
        w = self.W
        k_ell = torch.stack([j @ j.T, h.T @ h]).double().cpu()  # K = J J^T, L = H^T H
        with single_threaded():
            a, b_coeff, sqrt_e1, reorthogonalise = self._step(n, w.shape[1], float(tr_xx),
                                                              *k_ell)
        # W_{t+1} = A B, B = J + (1-eta)/(eta/N) (D + rho) W
        w1 = a.to(w) @ torch.addcmul(j, b_coeff.to(w)[:, None], w)
        if reorthogonalise:
            with single_threaded():
                w1 = self._reorthogonalise(w1, sqrt_e1)
        self.W = w1

    def _step(self, n: int, dim: int, tr_xx: float, k: torch.Tensor,
              ell: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, bool]:
        """The R x R part of the update (float64, CPU): sets d and rho to their t+1 values
        and gives A = (eta/N) E1^.5 C^-.5 U^T E^-.5, the coefficient of W in B, E1^.5, and
        whether R_{t+1} must be re-orthogonalised."""
        rank, d, rho = self.rank, self.d, self.rho
        eta = self.eta(n)
        inv_sqrt_e = self.e(d, rho, dim).rsqrt()
        z = self._z(n, eta, rho, d, inv_sqrt_e, k, ell)
        z_scale = max(1.0, float(z.trace()))
        c, u = torch.linalg.eigh(z / z_scale)
        c, u = c.flip(0) * z_scale, u.flip(1)  # largest first
        must_reorthogonalise = bool(c[0] > CONDITION_LIMIT * c[-1])
        c_floor = (rho * (1.0 - eta)) ** 2
        if bool((c < c_floor).any()):
            must_reorthogonalise = True
            c = c.clamp(min=c_floor)
        sqrt_c = c.sqrt()
        rho1 = (eta / n * tr_xx + (1.0 - eta) * (dim * rho + float(d.sum()))
                - float(sqrt_c.sum())) / (dim - rank)
        floor = max(EPSILON, DELTA * float(sqrt_c.max()))
        rho1 = max(rho1, floor)
        d1 = (sqrt_c - rho1).clamp(min=floor)
        sqrt_e1 = self.e(d1, rho1, dim).sqrt()
        a = (eta / n) * (sqrt_e1 / sqrt_c)[:, None] * u.T * inv_sqrt_e[None, :]
        b_coeff = (1.0 - eta) / (eta / n) * (d + rho)
        self.d, self.rho = d1, rho1
        return a, b_coeff, sqrt_e1, must_reorthogonalise

    @staticmethod
    def _z(n: int, eta: float, rho: float, d: torch.Tensor, inv_sqrt_e: torch.Tensor,
           k: torch.Tensor, ell: torch.Tensor) -> torch.Tensor:
        """Z = Y Y^T (R x R, float64) from K = J J^T and L = H^T H (eqn:Zt)."""
        scale = inv_sqrt_e[:, None] * inv_sqrt_e[None, :]
        dr = d + rho
        ell_s = ell * scale
        return ((eta / n) ** 2 * k * scale
                + (eta / n) * (1.0 - eta) * (ell_s * dr[None, :] + dr[:, None] * ell_s)
                + (1.0 - eta) ** 2 * torch.diag(dr * dr))

    @staticmethod
    def _reorthogonalise(w1: torch.Tensor, sqrt_e1: torch.Tensor) -> torch.Tensor:
        """Make R_{t+1} = E^-.5 W_{t+1} orthonormal again: W <- E^.5 C^-1 E^-.5 W with
        O = R R^T = C C^T (Cholesky; lower triangular, so the leading directions stay put),
        or Gram-Schmidt (QR) when Cholesky fails or is ill-conditioned."""
        w64 = w1.double().cpu()
        r = w64 / sqrt_e1[:, None]
        o = r @ r.T
        if float((o - torch.eye(len(o), dtype=o.dtype)).abs().max()) <= ORTHO_TOLERANCE:
            return w1
        chol, info = torch.linalg.cholesky_ex(o)
        if int(info) == 0:
            c_inv = torch.linalg.solve_triangular(chol, torch.eye(len(o), dtype=o.dtype),
                                                  upper=False)
            if float(c_inv.abs().max()) < 100.0:
                return (sqrt_e1[:, None] * (c_inv @ r)).to(w1)
        q, _ = torch.linalg.qr(r.T)
        return (sqrt_e1[:, None] * q.T).to(w1)

    # -- checkpoints ------------------------------------------------------------------------

    def state_dict(self) -> dict[str, Any]:
        return {"t": self.t, "rank": self.rank, "rho": self.rho, "d": self.d.clone(),
                "W": None if self.W is None else self.W.detach().clone()}

    def load_state_dict(self, state: dict[str, Any], device: torch.device) -> None:
        self.t, self.rank, self.rho = int(state["t"]), int(state["rank"]), float(state["rho"])
        self.d = state["d"].to(torch.float64).cpu()
        self.W = None if state["W"] is None else state["W"].to(device, torch.float32)
