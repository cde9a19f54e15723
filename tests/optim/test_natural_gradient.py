"""The online natural-gradient preconditioner against the identities of its derivation."""

from __future__ import annotations

import copy

import pytest
import torch

from asrdist.optim.natural_gradient import OnlineNaturalGradient, norm_ratio


def _stream(seed: int, n: int = 64, dim: int = 30, calls: int = 40) -> list[torch.Tensor]:
    """Minibatches whose scatter has a few dominant directions (like real activations)."""
    g = torch.Generator().manual_seed(seed)
    basis, _ = torch.linalg.qr(torch.randn(dim, dim, generator=g, dtype=torch.float64))
    scales = torch.logspace(1, -1, dim, dtype=torch.float64)
    mix = (basis * scales).T
    return [(torch.randn(n, dim, generator=g, dtype=torch.float64) @ mix).float()
            for _ in range(calls)], basis


def _ng(rank: int = 5, period: int = 1, alpha: float = 4.0) -> OnlineNaturalGradient:
    return OnlineNaturalGradient(rank, period, 2000.0, alpha)


def test_subspace_stays_orthonormal_and_w_w_t_is_e():
    batches, _ = _stream(0)
    ng = _ng(period=2)
    for x in batches:
        ng.precondition(x)
        r, d, rho = ng.fisher()
        torch.testing.assert_close(r @ r.T, torch.eye(5, dtype=torch.float64), atol=1e-4,
                                   rtol=0)
        w = ng.W.double()
        torch.testing.assert_close(w @ w.T, torch.diag(ng.e(d, rho, 30)), atol=1e-5, rtol=0)
        assert rho > 0 and bool((d > 0).all())


def test_preconditioned_rows_keep_the_norm_of_the_input():
    batches, _ = _stream(1)
    ng = _ng()
    for x in batches[:15]:
        x_hat, gamma = ng.precondition(x)
        assert float((gamma * x_hat).norm()) == pytest.approx(float(x.norm()), rel=1e-5)
        assert not torch.allclose(x_hat / x_hat.norm(), x / x.norm(), atol=1e-3)


@pytest.mark.parametrize("calls", [0, 3, 12, 13])  # initialising, updating and apply-only
def test_x_hat_is_beta_x_g_inverse_by_woodbury(calls):
    batches, _ = _stream(2, dim=12)
    ng = _ng(rank=4, period=4)
    for x in batches[:calls]:
        ng.precondition(x)
    x = batches[calls]
    if calls == 0:  # the first call initialises from x itself: compare after it
        ng.precondition(x)
        x = batches[1]
    r, d, rho = ng.fisher()
    dim = x.shape[1]
    fisher = r.T @ torch.diag(d) @ r + rho * torch.eye(dim, dtype=torch.float64)
    g = fisher + ng.alpha / dim * torch.trace(fisher) * torch.eye(dim, dtype=torch.float64)
    beta = ng.beta(d, rho, dim)
    assert beta == pytest.approx(float(rho + ng.alpha / dim * torch.trace(fisher)), rel=1e-6)
    x_hat, _ = ng.precondition(x)
    expected = beta * x.double() @ torch.linalg.inv(g)
    torch.testing.assert_close(x_hat.double(), expected, rtol=1e-4, atol=1e-5)


def test_the_subspace_finds_the_top_directions_of_the_scatter():
    batches, basis = _stream(3, n=256, dim=30, calls=60)
    ng = _ng(rank=5, period=1)
    for x in batches:
        ng.precondition(x)
    r, d, _ = ng.fisher()
    top = basis[:, :3]  # the three strongest directions of the data
    captured = (r @ top).norm(dim=0)  # 1 when a direction lies in R's row space
    assert bool((captured > 0.95).all()), captured
    assert bool((d[:-1] >= d[1:]).all())  # eigenvalues kept sorted, largest first


def test_huge_alpha_leaves_the_plain_direction():
    batches, _ = _stream(4)
    ng = _ng(alpha=1e7)
    for x in batches[:12]:
        x_hat, gamma = ng.precondition(x)
        torch.testing.assert_close(gamma * x_hat, x, rtol=1e-4, atol=1e-4)


def test_updates_every_call_then_every_update_period():
    batches, _ = _stream(5)
    ng = _ng(period=3)
    changed = []
    for x in batches[:20]:
        before = None if ng.W is None else ng.W.clone()
        ng.precondition(x)
        changed.append(before is None or not torch.equal(before, ng.W))
    assert changed == [True] * 11 + [False, False, True] * 3


def test_zero_rows_and_tiny_dims_are_harmless():
    ng = _ng()
    x_hat, gamma = ng.precondition(torch.zeros(8, 30))
    assert float(gamma) == 1.0 and bool(torch.isfinite(x_hat).all())
    x_hat, gamma = ng.precondition(torch.randn(8, 30))
    assert bool(torch.isfinite(gamma * x_hat).all())
    one = _ng().precondition(torch.randn(8, 1))
    assert float(one[1]) == 1.0
    small = _ng(rank=20)
    small.precondition(torch.randn(8, 6))
    assert small.rank == 5  # rank is capped at dim - 1, as Kaldi does


def test_state_dict_round_trip_continues_identically():
    batches, _ = _stream(6)
    a = _ng(period=2)
    for x in batches[:15]:
        a.precondition(x)
    b = _ng(period=2)
    b.load_state_dict(copy.deepcopy(a.state_dict()), torch.device("cpu"))
    for x in batches[15:25]:
        xa, ga = a.precondition(x)
        xb, gb = b.precondition(x)
        assert torch.equal(xa, xb) and torch.equal(ga, gb)


def test_an_implicit_ones_column_is_the_same_as_an_appended_one():
    batches, _ = _stream(7, dim=12)
    made, implicit = _ng(rank=4, period=3), _ng(rank=4, period=3)
    for x in batches[:20]:  # initialising, updating and apply-only calls
        x_hat, gamma = made.precondition(torch.cat([x, torch.ones(len(x), 1)], dim=1))
        part, last, traces = implicit.precondition_traces(x, ones_column=True)
        torch.testing.assert_close(part, x_hat[:, :-1], rtol=1e-4, atol=1e-5)
        torch.testing.assert_close(last, x_hat[:, -1], rtol=1e-4, atol=1e-5)
        torch.testing.assert_close(norm_ratio(traces[None]), gamma, rtol=1e-5, atol=0)
        torch.testing.assert_close(implicit.W, made.W, rtol=1e-4, atol=1e-5)
    assert implicit.W.shape == (4, 13)
