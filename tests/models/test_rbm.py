"""RBM conditionals and CD-1 statistics against brute force over every hidden state."""

from __future__ import annotations

import itertools

import pytest
import torch

from asrdist.models.rbm import RBM, frozen

HIDDEN, VISIBLE = 4, 3


def _tiny(gaussian: bool, seed: int = 0) -> RBM:
    g = torch.Generator().manual_seed(seed)
    rbm = RBM(VISIBLE, HIDDEN, gaussian, g)
    rbm.weight = frozen(torch.randn(HIDDEN, VISIBLE, generator=g, dtype=torch.float64))
    rbm.visible_bias = frozen(torch.randn(VISIBLE, generator=g, dtype=torch.float64))
    rbm.hidden_bias = frozen(torch.randn(HIDDEN, generator=g, dtype=torch.float64))
    return rbm


def _energy(rbm: RBM, params: list[torch.Tensor], v: torch.Tensor,
            h: torch.Tensor) -> torch.Tensor:
    w, b, c = params
    visible = 0.5 * ((v - b) ** 2).sum() if rbm.gaussian else -(b @ v)
    return visible - c @ h - h @ w @ v


HIDDEN_STATES = torch.tensor(list(itertools.product([0.0, 1.0], repeat=HIDDEN)),
                             dtype=torch.float64)


def _log_marginal(rbm: RBM, params: list[torch.Tensor], v: torch.Tensor) -> torch.Tensor:
    """log sum_h exp(-E(v, h)): minus the free energy, by enumerating all 2^H states."""
    return torch.logsumexp(torch.stack([-_energy(rbm, params, v, h) for h in HIDDEN_STATES]),
                           0)


@pytest.mark.parametrize("gaussian", [False, True])
def test_hidden_conditional_is_the_energy_s(gaussian):
    rbm = _tiny(gaussian)
    v = torch.tensor([0.3, -1.2, 0.8], dtype=torch.float64)
    weights = torch.stack([-_energy(rbm, rbm.parameters(), v, h) for h in HIDDEN_STATES])
    post = torch.softmax(weights, 0)  # p(h | v), by brute force
    torch.testing.assert_close(rbm.hidden_probs(v[None])[0], post @ HIDDEN_STATES)


def test_bernoulli_visible_conditional_is_the_energy_s():
    rbm = _tiny(False)
    h = torch.tensor([1.0, 0.0, 1.0, 1.0], dtype=torch.float64)
    states = torch.tensor(list(itertools.product([0.0, 1.0], repeat=VISIBLE)),
                          dtype=torch.float64)
    post = torch.softmax(torch.stack([-_energy(rbm, rbm.parameters(), v, h) for v in states]),
                         0)
    torch.testing.assert_close(rbm.visible_mean(h[None])[0], post @ states)


def test_gaussian_visible_mean_minimises_the_energy():
    rbm = _tiny(True)
    h = torch.tensor([0.0, 1.0, 1.0, 0.0], dtype=torch.float64)
    v = rbm.visible_mean(h[None])[0].clone().requires_grad_(True)
    (grad,) = torch.autograd.grad(_energy(rbm, rbm.parameters(), v, h), v)
    torch.testing.assert_close(grad, torch.zeros(VISIBLE, dtype=torch.float64))


@pytest.mark.parametrize("gaussian", [False, True])
def test_cd1_is_the_free_energy_difference_of_data_and_reconstruction(gaussian):
    """CD-1 = d/dtheta [log p*(v0) - log p*(v1)], v1 the reconstruction held fixed: brute
    force over every hidden state, for every possible hidden sample."""
    rbm = _tiny(gaussian, seed=1)
    g = torch.Generator().manual_seed(5)
    v0 = (torch.randn(6, VISIBLE, generator=g, dtype=torch.float64) if gaussian
          else (torch.rand(6, VISIBLE, generator=g) < 0.5).double())
    samples = HIDDEN_STATES[torch.randint(0, 2**HIDDEN, (6,), generator=g)]
    got = rbm.cd1(v0, samples)
    v1 = rbm.visible_mean(samples)
    params = [p.clone().requires_grad_(True) for p in rbm.parameters()]
    objective = sum(_log_marginal(rbm, params, v0[i]) - _log_marginal(rbm, params, v1[i])
                    for i in range(6)) / 6
    want = torch.autograd.grad(objective, params)
    torch.testing.assert_close(got.weight, want[0])
    torch.testing.assert_close(got.visible_bias, want[1])
    torch.testing.assert_close(got.hidden_bias, want[2])


def test_expected_cd1_over_hidden_samples_matches_the_sampler():
    """The mean of many sampled CD-1 estimates converges to the exact expectation over
    p(h0 | v0), enumerated."""
    rbm = _tiny(False, seed=2)
    v0 = torch.tensor([[1.0, 0.0, 1.0]], dtype=torch.float64)
    probs = rbm.hidden_probs(v0)[0]
    exact = torch.zeros(HIDDEN, VISIBLE, dtype=torch.float64)
    for h in HIDDEN_STATES:
        p_h = torch.prod(torch.where(h > 0, probs, 1 - probs))
        exact += p_h * rbm.cd1(v0, h[None]).weight
    g = torch.Generator().manual_seed(0)
    v = v0.expand(20000, VISIBLE)
    sampled = rbm.cd1(v, rbm.sample_hidden(v, g)).weight
    torch.testing.assert_close(sampled, exact, atol=0.02, rtol=0)
