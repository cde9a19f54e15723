"""The simulator against the real learner processes where both are deterministic, and against
plain SGD and the ring schedule's averaging matrices."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from asrdist.errors import AsrdistError
from asrdist.parallel import rings
from asrdist.parallel.registry import algo_names
from asrdist.parallel.weights import flat_weights
from asrdist.simulate.run import simulate
from asrdist.simulate.speed import SpeedModel
from tests.parallel._learner import batch, make_model
from tests.parallel.conftest import ok, run_learners
from tests.parallel.test_strategies import plain_sgd


def mse(i: int, k: int, model: torch.nn.Module, size: int = 8) -> torch.Tensor:
    """Learner i's share of step k's global batch, as the real learners' (tests.parallel)."""
    x, y = batch(k, i, size, False)
    return torch.nn.functional.mse_loss(model(x), y)


def sgd(lr: float, momentum: float = 0.0):
    return lambda m: torch.optim.SGD(m.parameters(), lr=lr, momentum=momentum)


@pytest.mark.parametrize("algo", algo_names())
def test_one_learner_is_plain_sgd_bit_for_bit(algo):
    res = simulate(algo, 1, 5, make_model, sgd(0.1, 0.9), mse,
                   speed=SpeedModel(compute_s=0.3, jitter=0.5))
    ref = plain_sgd(5, 0.1, lambda s: batch(s, 0, 8, False), momentum=0.9)
    assert torch.equal(res.final, flat_weights(ref))
    assert res.summary["time_s"] > 0 and res.summary["wait_s"] == [0.0]


@pytest.mark.parametrize("algo,n,options", [
    ("ssgd", 2, {}), ("ssgd", 4, {}), ("ma", 2, {"avg_period": 3}), ("ma", 3, {"avg_period": 2}),
])
def test_synchronous_strategies_agree_with_real_processes(tmp_path, algo, n, options):
    real = ok(run_learners({"algo": algo, "lr": 0.1, "momentum": 0.9, "steps": 7,
                            "options": options, "history": True}, n, tmp_path))
    sim = simulate(algo, n, 7, lambda i: make_model(0), sgd(0.1, 0.9), mse,
                   speed=SpeedModel(jitter=0.5, latency_s=0.01), options=options,
                   keep_history=True)
    for r in range(n):
        for k in range(7):
            torch.testing.assert_close(sim.history[r][k], real[r]["history"][k + 1],
                                       rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(sim.learners[r], real[r]["before"], rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(sim.final, real[0]["final"], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("algo", ["adpsgd-fixed", "adpsgd-random", "adpsgd-delay1",
                                  "adpsgd-delayavg"])
def test_adpsgd_lr0_same_consensus_rounds_as_real_processes(tmp_path, algo):
    """Three learners: one active learner, so the order of exchanges is the ring schedule's
    whatever the timing; its weights after every step are the real one's."""
    steps = 9
    real = ok(run_learners({"algo": algo, "lr": 0.0, "steps": steps, "init": "rank",
                            "compute_s": 0.002, "history": True, "options": {"seed": 3}},
                           3, tmp_path))
    sim = simulate(algo, 3, steps, make_model, sgd(0.0), mse, options={"seed": 3},
                   speed=SpeedModel(jitter=0.5, latency_s=0.3), keep_history=True)
    start = torch.stack([flat_weights(make_model(i)) for i in range(3)])
    moved = [not torch.allclose(sim.history[1][k], sim.history[1][k + 1]) for k in range(3)]
    assert any(moved)  # exchanges did change the active learner's weights
    for k in range(steps):
        torch.testing.assert_close(sim.history[1][k], real[1]["history"][k + 1], rtol=0,
                                   atol=1e-6)
    torch.testing.assert_close(sim.final, start.mean(0), rtol=0, atol=1e-6)
    torch.testing.assert_close(real[0]["final"], sim.final, rtol=0, atol=1e-6)


@pytest.mark.parametrize("kind", ["fixed", "random"])
def test_equal_speeds_lr0_is_the_product_of_the_rounds_averaging_matrices(kind):
    """Four learners, equal speeds: every step is one round of the ring schedule, exactly the
    matrices that rings.expected_mixing_gap averages."""
    n, steps = 4, 6
    sim = simulate(f"adpsgd-{kind}", n, steps, make_model, sgd(0.0), mse,
                   speed=SpeedModel(compute_s=1.0), options={"seed": 5}, keep_history=True)
    w = torch.stack([flat_weights(make_model(i)) for i in range(n)]).double()
    for k in range(steps):
        mix = np.eye(n)
        for a, p in rings.round_pairs(kind, n, k, 5):
            step = np.eye(n)
            step[[a, a, p, p], [a, p, a, p]] = 0.5
            mix = step @ mix
        w = torch.from_numpy(mix) @ w
        for a in rings.actives(n):  # an active learner's weights hold its round at once
            torch.testing.assert_close(sim.history[a][k].double(), w[a], rtol=0, atol=1e-6)
    assert sim.summary["exchanges"] == steps * len(rings.actives(n))


def test_delay1_hides_the_exchange_behind_the_optimizer_step_too():
    """An exchange longer than forward and backward: the plain active learner waits for it at
    after_backward, delay1 only at the next step's start, after the optimizer step."""
    speed = SpeedModel(compute_s=1.0, update_s=0.5, latency_s=1.5)
    plain = simulate("adpsgd-fixed", 2, 10, make_model, sgd(0.05), mse, speed=speed)
    delay1 = simulate("adpsgd-delay1", 2, 10, make_model, sgd(0.05), mse, speed=speed)
    assert plain.summary["wait_s"] == pytest.approx([0.0, 5.0])  # 0.5 s a step
    assert delay1.summary["wait_s"] == pytest.approx([0.0, 0.0])
    assert plain.summary["time_s"] == pytest.approx(delay1.summary["time_s"] + 5.0)
    # delay1: every gradient (the first step applies none) is applied one exchange late
    assert delay1.summary["staleness"] == {1: 18}
    # plain: one exchange merged per gradient, unless the passive runs ahead of a slow exchange
    assert plain.summary["staleness"] == {0: 3, 1: 17}
    fast = simulate("adpsgd-fixed", 2, 10, make_model, sgd(0.05), mse,
                    speed=SpeedModel(compute_s=1.0, update_s=0.5, latency_s=0.2))
    assert fast.summary["staleness"] == {1: 20}
    # delayavg: merged late like delay1, but the gradient is fresh: nothing merged in between
    late = simulate("adpsgd-delayavg", 2, 10, make_model, sgd(0.05), mse, speed=speed)
    assert late.summary["wait_s"] == pytest.approx([0.0, 0.0])
    assert late.summary["staleness"] == {0: 20}


def test_hadpsgd_super_learners_stay_identical_and_keep_the_mean():
    sim = simulate("hadpsgd", 4, 12, make_model, sgd(0.0), mse, speed=SpeedModel(jitter=0.3),
                   options={"learners_per_node": 2, "hadpsgd_variant": "random"})
    assert torch.equal(sim.learners[0], sim.learners[1])
    assert torch.equal(sim.learners[2], sim.learners[3])
    leaders = torch.stack([flat_weights(make_model(0)), flat_weights(make_model(2))])
    torch.testing.assert_close(sim.final, leaders.mean(0), rtol=0, atol=1e-6)
    assert sim.summary["exchanges"] == 12


def test_records_evaluate_the_mean_against_time_and_epochs():
    seen = []

    def evaluate(model):
        seen.append(flat_weights(model))
        return {"ce": float(mse(0, 0, model))}

    sim = simulate("ma", 2, 6, make_model, sgd(0.1), mse, eval_fn=evaluate, eval_every=2,
                   epoch_steps=4, speed=SpeedModel(compute_s=0.5), options={"avg_period": 3})
    assert [r["steps"] for r in sim.records] == [2, 4, 6]
    assert [r["epochs"] for r in sim.records] == [1, 2, 3]
    assert [r["time_s"] for r in sim.records] == [1.0, 2.0, 3.0]
    assert sim.records[-1]["dist_to_mean"] == pytest.approx(0.0, abs=1e-6)  # averaged at 6
    assert sim.records[0]["dist_to_mean"] > 0
    torch.testing.assert_close(seen[-1], sim.final)


def test_bad_input_is_one_line_naming_the_option():
    with pytest.raises(AsrdistError, match="learners-per-node"):
        simulate("hadpsgd", 4, 1, make_model, sgd(0.1), mse)
    with pytest.raises(AsrdistError, match="avg_periodd"):
        simulate("ma", 2, 1, make_model, sgd(0.1), mse, options={"avg_periodd": 3})
    with pytest.raises(AsrdistError, match="learners"):
        simulate("ssgd", 0, 1, make_model, sgd(0.1), mse)
