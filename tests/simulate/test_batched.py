"""Learners computed together against learners computed one at a time: whole simulated runs of
every registered strategy agree (weights at every step, the exported average, the clock), and
learners are indeed evaluated together, asynchronous ones included."""

from __future__ import annotations

import pytest
import torch

import asrdist.simulate.batched as batched
from asrdist.models.build import ModelConfig, build_model
from asrdist.simulate.batched import Batcher, FrameLoss
from asrdist.simulate.run import simulate
from asrdist.simulate.speed import SpeedModel
from tests.simulate.test_run import MULTI, _node_options

DIM, PDFS, BATCH, FRAMES = 3, 5, 2, 4
CONFIG = ModelConfig(layers=2, units=4, chunk_left_context=1, chunk_right_context=1)


def _data(learners: int, steps: int):
    gen = torch.Generator().manual_seed(3)
    x = torch.randn(learners, steps, BATCH, FRAMES + 2, DIM, generator=gen)
    y = torch.randint(0, PDFS, (learners, steps, BATCH, FRAMES), generator=gen)
    return FrameLoss(lambda i, k: (x[i, k], y[i, k]))


def _run(algo: str, n: int, steps: int, together: int, config: ModelConfig = CONFIG,
         speed: SpeedModel | None = None):
    torch.manual_seed(0)
    init = build_model(config, DIM, PDFS)

    def make_model(i: int) -> torch.nn.Module:
        model = build_model(config, DIM, PDFS)
        model.load_state_dict(init.state_dict())
        return model

    return simulate(algo, n, steps, make_model,
                    lambda m: torch.optim.SGD(m.parameters(), lr=0.3, momentum=0.5),
                    _data(n, steps), speed=speed or SpeedModel(jitter=0.5, latency_s=0.05),
                    options=_node_options(algo, n), keep_history=True, together=together)


def _assert_same_run(a, b) -> None:
    assert a.summary["time_s"] == pytest.approx(b.summary["time_s"])
    assert a.summary["staleness"] == b.summary["staleness"]
    for ha, hb in zip(a.history, b.history, strict=True):
        for wa, wb in zip(ha, hb, strict=True):
            torch.testing.assert_close(wa, wb, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(a.final, b.final, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("algo", MULTI)
def test_every_strategy_runs_as_with_learners_one_at_a_time(algo):
    n = 6 if algo == "hadpsgd" else 4
    _assert_same_run(_run(algo, n, 5, together=64), _run(algo, n, 5, together=0))


def test_dnn_learners_and_small_groups_agree_too():
    dnn = ModelConfig(type="dnn", splice=1, hidden_layers=2, hidden_units=6)
    one = _run("adpsgd-random", 4, 4, together=0, config=dnn)
    _assert_same_run(_run("adpsgd-random", 4, 4, together=3, config=dnn), one)
    _assert_same_run(_run("ssgd", 4, 4, together=64, config=CONFIG),
                     _run("ssgd", 4, 4, together=1, config=CONFIG))


@pytest.mark.parametrize("algo", ["ssgd", "adpsgd-random"])
def test_learners_are_evaluated_together(algo, monkeypatch):
    """Synchronous learners all at once; asynchronous ones at different times on different
    weights, still several at a time; never more than ``together``."""
    sizes: list[int] = []
    evaluate = batched._evaluate
    monkeypatch.setattr(batched, "_evaluate", lambda members: (sizes.append(len(members)),
                                                               evaluate(members)))
    _run(algo, 8, 4, together=64, speed=SpeedModel(jitter=0.3))
    assert sum(sizes) == 8 * 4
    if algo == "ssgd":
        assert sizes == [8] * 4
    else:
        assert max(sizes) > 1 and len(sizes) < 8 * 4
    sizes.clear()
    _run(algo, 8, 2, together=3, speed=SpeedModel(jitter=0.3))
    assert sum(sizes) == 8 * 2 and max(sizes) <= 3


def test_a_loss_it_cannot_batch_is_computed_at_once_on_the_learners_model():
    model = torch.nn.Linear(2, 1)
    calls = []

    def loss(i, k, m):
        calls.append((i, k, m))
        return m(torch.ones(1, 2)).sum()

    batcher = Batcher(loss, 8)
    pending = batcher.submit(0, 3, model)
    assert calls == [(0, 3, model)]  # computed when the learner started, as before
    pending.loss().backward()
    assert model.weight.grad is not None


@pytest.mark.cuda
def test_on_a_gpu_learners_are_computed_together_and_agree_with_the_cpu(monkeypatch):
    sizes: list[int] = []
    evaluate = batched._evaluate
    monkeypatch.setattr(batched, "_evaluate", lambda members: (sizes.append(len(members)),
                                                               evaluate(members)))
    torch.manual_seed(0)
    init = build_model(CONFIG, DIM, PDFS)
    data = _data(4, 3)

    def run(device: str, together: int | None):
        def make_model(i: int) -> torch.nn.Module:
            model = build_model(CONFIG, DIM, PDFS)
            model.load_state_dict(init.state_dict())
            return model.to(device)

        loss = FrameLoss(lambda i, k: tuple(t.to(device) for t in data.batch(i, k)))
        return simulate("adpsgd-random", 4, 3, make_model,
                        lambda m: torch.optim.SGD(m.parameters(), lr=0.3, momentum=0.5), loss,
                        speed=SpeedModel(jitter=0.5), together=together)

    gpu, cpu = run("cuda", None), run("cpu", 0)  # the default on a GPU: together
    assert sum(sizes) == 4 * 3 and max(sizes) > 1
    torch.testing.assert_close(gpu.final.cpu(), cpu.final, rtol=1e-3, atol=1e-4)
