"""B_simple in the simulator: which gradients it takes (checked by hand at the start, where
every learner's weights are known), when, and that the simulation runs as without it."""

from __future__ import annotations

import pytest
import torch

from asrdist.simulate.noise import NoiseProbe
from asrdist.simulate.run import simulate
from tests.parallel._learner import batch, make_model
from tests.simulate.test_run import sgd


def mse(i: int, k: int, model: torch.nn.Module) -> torch.Tensor:
    x, y = batch(k, i, 8, False)
    return torch.nn.functional.mse_loss(model(x), y)


def gradient(model: torch.nn.Module, i: int, k: int) -> torch.Tensor:
    """Learner i's gradient on its batch of step k, by plain backward."""
    model.zero_grad()
    mse(i, k, model).backward()
    return torch.cat([p.grad.flatten() for p in model.parameters()])


@pytest.mark.parametrize("n", [1, 3])
def test_first_measurement_is_the_learners_gradients_at_the_start(n):
    """Before any step, every learner has make_model(0)'s weights: the record must hold the
    mean squared norm of their gradients on their step-0 batches (B_small 8) and that of the
    mean gradient (B_big 8 n); one learner takes its batches of steps 0 and 1 instead."""
    probe = NoiseProbe(every=2, batch=8)
    res = simulate("ssgd", n, 6, lambda i: make_model(0), sgd(0.1, 0.9), mse, noise=probe)
    plain = simulate("ssgd", n, 6, lambda i: make_model(0), sgd(0.1, 0.9), mse)
    assert torch.equal(res.final, plain.final)
    assert [r["steps"] for r in res.noise] == [0, 2, 4, 6]
    model = make_model(0)
    pairs = [(i, 0) for i in range(n)] if n > 1 else [(0, 0), (0, 1)]
    grads = [gradient(model, i, k) for i, k in pairs]
    small_sq = sum(float(g.square().sum()) for g in grads) / len(grads)
    big_sq = float(torch.stack(grads).mean(0).square().sum())
    first = res.noise[0]
    assert (first["b_small"], first["b_big"]) == (8, 8 * len(grads))
    assert first["grad_sq_small"] == pytest.approx(small_sq, rel=1e-6)
    assert first["grad_sq_big"] == pytest.approx(big_sq, rel=1e-6)
    b = 8 * len(grads)
    g_sq = (b * big_sq - 8 * small_sq) / (b - 8)
    trace = (small_sq - big_sq) / (1 / 8 - 1 / b)
    assert first["grad_sq"] == pytest.approx(g_sq, rel=1e-5)  # the first: not smoothed yet
    assert first["trace_sigma"] == pytest.approx(trace, rel=1e-5)
    # on random targets the true gradient is small: |G|^2 may come out negative, and no
    # B_simple is told then
    assert first["b_simple"] == (pytest.approx(trace / g_sq, rel=1e-5) if g_sq > 0 else None)


def test_asynchronous_learners_are_measured_too():
    probe = NoiseProbe(every=3, batch=8)
    res = simulate("adpsgd-random", 4, 9, lambda i: make_model(0), sgd(0.05), mse, noise=probe)
    assert len(res.noise) == 4 and all(r["b_big"] == 32 for r in res.noise)
    assert all(r["time_s"] >= 0 and r["grad_sq_small"] > r["grad_sq_big"] for r in res.noise)
