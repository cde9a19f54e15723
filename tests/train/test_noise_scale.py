"""The gradient noise scale: the estimator against a linear regression whose gradient and
gradient covariance are computed in closed form, and the metric in real training runs (one
learner: halves of its batch; two learner processes: across the learners)."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

from asrdist.models.final import load_final
from asrdist.parallel.strategy import Single
from asrdist.testing import make_corpus
from asrdist.train.metrics import metrics_path, read_metrics
from asrdist.train.noise_scale import NoiseProbe, NoiseScale, across_norms, estimate
from asrdist.train.trainer import train
from tests.parallel.cli_learners import join_learners, start_learners
from tests.train.corpus import train_config

# y = w.x with squared error / 2 per example: example i's gradient is (w.x_i - t_i) x_i
RNG = np.random.default_rng(0)
X = RNG.normal(size=(40, 3))
T = X @ np.array([1.0, -2.0, 0.5]) + RNG.normal(scale=0.8, size=40)
W = np.array([0.6, -1.0, 0.2])  # the weights the gradients are taken at


def closed_form() -> tuple[float, float]:
    """|G|^2 and tr(Sigma) of one example drawn uniformly from the 40, by hand: G is the
    mean per-example gradient, Sigma their (population) covariance."""
    per_example = (X @ W - T)[:, None] * X
    g = per_example.mean(0)
    trace = float(((per_example - g) ** 2).sum(1).mean())
    return float(g @ g), trace


def regression_loss(model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return ((model(x).squeeze(-1) - y) ** 2).mean() / 2


def linear_model() -> torch.nn.Module:
    model = torch.nn.Linear(3, 1, bias=False).double()
    with torch.no_grad():
        model.weight.copy_(torch.tensor(W)[None])
    return model


def sample(gen: torch.Generator, size: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``size`` examples drawn with replacement, as (batch, 1 frame, 3) and (batch, 1)."""
    rows = torch.randint(0, len(X), (size,), generator=gen)
    return torch.tensor(X)[rows][:, None, :], torch.tensor(T)[rows][:, None]


def test_the_estimator_inverts_the_expected_norms():
    g_sq, trace = 2.5, 40.0
    found = estimate(g_sq + trace / 8, g_sq + trace / 64, 8, 64)
    assert found == pytest.approx((g_sq, trace), rel=1e-12)
    with pytest.raises(ValueError):
        estimate(1.0, 1.0, 8, 8)


def test_moving_averages_and_their_ratio():
    noise = NoiseScale(decay=0.5)
    first = noise.update(2.5 + 40 / 8, 2.5 + 40 / 64, 8, 64)
    assert first["grad_sq"] == pytest.approx(2.5) and first["b_simple"] == pytest.approx(16)
    second = noise.update(1.0 + 8 / 8, 1.0 + 8 / 64, 8, 64)  # |G|^2 1, tr 8
    # EMAs 0.5 * (0.5 * 2.5) + 0.5 * 1 = 1.125 and 0.5 * (0.5 * 40) + 0.5 * 8 = 14,
    # debiased by 1 - 0.5^2
    assert second["grad_sq"] == pytest.approx(1.125 / 0.75)
    assert second["trace_sigma"] == pytest.approx(14 / 0.75)
    assert second["b_simple"] == pytest.approx(14 / 1.125)
    again = NoiseScale()
    again.load_state_dict(noise.state_dict())
    assert again.update(1, 0.5, 1, 2) == noise.update(1, 0.5, 1, 2)


def test_halves_of_a_batch_converge_to_the_closed_form():
    """A lone learner's estimate (halves of batches of 16) over many batches at fixed weights,
    with long moving averages, against the hand-computed |G|^2 and tr(Sigma)."""
    g_sq, trace = closed_form()
    model = linear_model()
    probe = NoiseProbe(copy.deepcopy(model), 1, None, torch.device("cpu"))
    probe.noise = NoiseScale(decay=0.999)
    gen = torch.Generator().manual_seed(1)
    for _ in range(6000):
        found = probe.measure(model, *sample(gen, 16), regression_loss)
    assert (found["b_small"], found["b_big"]) == (8, 16)
    assert found["grad_sq"] == pytest.approx(g_sq, rel=0.05)
    assert found["trace_sigma"] == pytest.approx(trace, rel=0.05)
    assert found["b_simple"] == pytest.approx(trace / g_sq, rel=0.08)
    assert model.weight.grad is None  # the measurement leaves the model's gradient alone


def test_across_learners_converges_to_the_closed_form():
    """Four learners' local gradients at batch 4, averaged with equal weights (B_big = 16)."""
    g_sq, trace = closed_form()
    model = linear_model()
    noise = NoiseScale(decay=0.999)
    gen = torch.Generator().manual_seed(2)
    for _ in range(6000):
        grads = []
        for _ in range(4):
            loss = regression_loss(model, *sample(gen, 4))
            grads.append(torch.autograd.grad(loss, [model.weight])[0].flatten())
        found = noise.update(*across_norms(grads, [4, 4, 4, 4]))
    assert (found["b_small"], found["b_big"]) == (4, 16)
    assert found["grad_sq"] == pytest.approx(g_sq, rel=0.05)
    assert found["trace_sigma"] == pytest.approx(trace, rel=0.05)


TINY = dict(layers=1, units=16, chunk_len=10, batch_size=8, shuffle_buffer=32, heldout_utts=2,
            log_every=1, lr=0.5, lr_ref_batch=8, warmup_epochs=0.5, cmvn="spk", dropout=0.2,
            epochs=2)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return make_corpus(tmp_path_factory.mktemp("corpus") / "c", num_utts=16)


def _records(out, rank: int, kind: str) -> list[dict]:
    return [r for r in read_metrics(metrics_path(out, rank)) if r["kind"] == kind]


def test_one_learner_run_records_the_noise_scale_and_trains_the_same(corpus, tmp_path):
    """Every 2 steps a noise record from halves of the batch of 8; the training (with dropout,
    whose random draws the measurement must not shift) is the same bit for bit as without."""
    train(train_config(corpus, tmp_path / "plain", TINY), Single())
    train(train_config(corpus, tmp_path / "noise", TINY, noise_scale_every=2), Single())
    noise = _records(tmp_path / "noise", 0, "noise")
    steps = [r["step"] for r in _records(tmp_path / "noise", 0, "train")]
    assert [r["step"] for r in noise] == [s - 1 for s in steps if (s - 1) % 2 == 0]
    # B_big is 8 when both halves have as many labelled frames, a little less otherwise
    assert all(r["b_small"] == 4 and 7 < r["b_big"] <= 8 for r in noise)
    assert all(r["grad_sq_small"] > 0 and r["grad_sq_big"] > 0 for r in noise)
    assert any(r["b_simple"] is not None and r["b_simple"] > 0 for r in noise)
    assert {"epoch", "progress", "wall_s", "measure_s", "trace_sigma", "grad_sq"} <= set(noise[0])
    losses = [[r["loss"] for r in _records(tmp_path / run, 0, "train")]
              for run in ("plain", "noise")]
    assert losses[0] == losses[1]
    finals = [load_final(tmp_path / run / "final.pt")[0].state_dict()
              for run in ("plain", "noise")]
    assert all(torch.equal(finals[0][k], finals[1][k]) for k in finals[0])


def test_a_resumed_run_continues_the_moving_averages(corpus, tmp_path):
    """Stopped at step 5 (checkpointed there) and resumed: the same noise records as one
    uninterrupted run, the moving averages restored from the checkpoint."""
    train(train_config(corpus, tmp_path / "once", TINY, noise_scale_every=2), Single())
    out = tmp_path / "twice"
    train(train_config(corpus, out, TINY, noise_scale_every=2, max_steps=5), Single())
    train(train_config(corpus, out, TINY, noise_scale_every=2, resume=True), Single())
    drop = ("wall_s", "measure_s")
    once, twice = ([{k: v for k, v in r.items() if k not in drop}
                    for r in _records(tmp_path / run, 0, "noise")] for run in ("once", "twice"))
    assert len(once) > 4 and once == twice


def test_two_learners_measure_across_each_other(corpus, tmp_path):
    """ssgd with 2 real learner processes (gloo): B_small is the local batch, B_big twice it,
    both learners write the same figures (one allreduce), and training is unchanged."""
    args = [f"--{k.replace('_', '-')}={v}" for k, v in TINY.items()]
    args += ["--batch-size=4", "--exchange-timeout=30", "--distance-every=0"]
    for name, extra in (("plain", []), ("noise", ["--noise-scale-every=3"])):
        out = tmp_path / name
        procs = start_learners(corpus, out, "ssgd", *args, *extra)
        assert join_learners(procs, out) == [0, 0], (out / "err0.txt").read_text()[-2000:]
    out = tmp_path / "noise"
    ranks = [_records(out, r, "noise") for r in (0, 1)]
    assert ranks[0] and [r["step"] for r in ranks[0]] == list(range(0, 3 * len(ranks[0]), 3))
    assert all((r["b_small"], r["b_big"]) == (4, 8) for r in ranks[0])
    for a, b in zip(*ranks, strict=True):
        assert a["grad_sq_small"] == pytest.approx(b["grad_sq_small"], rel=1e-6)
        assert a["b_simple"] == pytest.approx(b["b_simple"], rel=1e-6)
    losses = [[r["loss"] for r in _records(tmp_path / run, 0, "train")]
              for run in ("plain", "noise")]
    assert losses[0] == losses[1]
