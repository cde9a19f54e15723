"""Each strategy's defining property, with real learner processes (gloo on 127.0.0.1).

The properties every strategy must have (one learner is plain SGD bit for bit; with lr = 0 the
learners' mean is kept) run over the registry, so a strategy registered before collection (the
built-ins, and test_toy_strategy's, which conftest imports) is covered without an edit here.
"""

from __future__ import annotations

import pytest
import torch

from asrdist.parallel import registry
from asrdist.parallel.registry import algo_names, make_strategy
from asrdist.parallel.rules.weights import flat_weights
from asrdist.parallel.strategy import train_step
from tests.parallel._learner import batch, make_model
from tests.parallel.conftest import ok, run_learners

ALGOS = algo_names()
MULTI = [name for name, spec in registry.specs().items() if spec.multi_learner]
ADPSGD = [name for name in ALGOS if name.startswith("adpsgd-")]


def plain_sgd(steps: int, lr: float, data, momentum: float = 0.0,
              model: torch.nn.Module | None = None, opt=None) -> torch.nn.Module:
    """The reference: a single process's SGD over ``data(step)``."""
    model = model or make_model(0)
    opt = opt or torch.optim.SGD(model.parameters(), lr=lr, momentum=momentum)
    for step in range(steps):
        x, y = data(step)
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        opt.step()
    return model


def blocks_reference(steps: int, k: int, n: int, outer=None, every_until: int = 0,
                     ) -> list[torch.Tensor]:
    """The reference of ma (and of bmuf and diloco): ``n`` learners of local SGD (lr 0.1,
    momentum 0.5) from make_model(0); after every ``k`` steps (and after each of the first
    ``every_until``) every learner loads ``outer(start, mean)`` (default: the mean),
    ``start`` being what they loaded last."""
    models = [make_model(0) for _ in range(n)]
    opts = [torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.5) for m in models]
    start = flat_weights(models[0])
    for step in range(steps):
        for r in range(n):
            x, y = batch(step, r, 8, False)
            opts[r].zero_grad()
            torch.nn.functional.mse_loss(models[r](x), y).backward()
            opts[r].step()
        if (step + 1) % k == 0 or step < every_until:
            mean = torch.stack([flat_weights(m) for m in models]).mean(0)
            start = mean if outer is None else outer(start, mean)
            for m in models:
                torch.nn.utils.vector_to_parameters(start.clone(), m.parameters())
    return [flat_weights(m) for m in models]


def test_every_registered_strategy_is_covered():
    """Whatever is registered now was collected into the generic tests below: a strategy
    registered later than collection would escape them."""
    assert {"ssgd", "adpsgd-fixed", "adpsgd-random", "adpsgd-delay1", "hadpsgd", "ma"} <= set(
        ALGOS)
    assert set(algo_names()) <= set(ALGOS)
    assert {n for n, s in registry.specs().items() if s.multi_learner} <= set(MULTI)


@pytest.mark.parametrize("algo", ALGOS)
def test_one_learner_is_plain_sgd_bit_for_bit(algo):
    strategy = make_strategy(algo)
    model = make_model(0)
    wrapped = strategy.wrap_model(model)
    opt = torch.optim.SGD(wrapped.parameters(), lr=0.1, momentum=0.9)
    for step in range(5):
        x, y = batch(step, 0, 8, False)
        train_step(strategy, wrapped, opt, step,
                   lambda m, x=x, y=y: torch.nn.functional.mse_loss(m(x), y))
        if step == 2:
            strategy.sync(wrapped)
    strategy.finalize(wrapped)
    strategy.close()
    ref = plain_sgd(5, 0.1, lambda s: batch(s, 0, 8, False), momentum=0.9)
    assert torch.equal(flat_weights(model), flat_weights(ref))


@pytest.mark.parametrize("algo", MULTI)
def test_lr0_keeps_the_learners_mean(tmp_path, algo):
    """Averaging of any kind keeps the mean of the weights the learners start from (after
    wrap_model: DDP gives every learner of a group the first one's); finalize exports it."""
    res = ok(run_learners({"algo": algo, "lr": 0.0, "steps": 12, "init": "rank",
                           "compute_s": 0.002, "checkpoint_at": 5}, 3, tmp_path))
    mean0 = torch.stack([r["history"][0] for r in res]).mean(0)
    for r in res:
        torch.testing.assert_close(r["final"], mean0, rtol=0, atol=1e-6)


def test_ssgd_two_learners_equal_one_process_with_twice_the_batch(tmp_path):
    res = ok(run_learners({"algo": "ssgd", "lr": 0.1, "momentum": 0.9, "steps": 6, "batch": 8},
                          2, tmp_path))
    ref = flat_weights(plain_sgd(6, 0.1, lambda s: batch(s, 0, 16, False), momentum=0.9))
    for r in res:
        torch.testing.assert_close(r["final"], ref, rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(r["before"], ref, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("options", [
    {"avg_period": 3},
    {"avg_period": 5, "avg_frames": 64, "batch_size": 4, "chunk_len": 5},  # 64/20 -> 3 steps
])
def test_ma_is_k_local_steps_then_the_average(tmp_path, options):
    k, steps, n = 3, 7, 2
    res = ok(run_learners({"algo": "ma", "lr": 0.1, "momentum": 0.5, "steps": steps,
                           "options": options}, n, tmp_path))
    refs = blocks_reference(steps, k, n)
    for r in range(n):
        torch.testing.assert_close(res[r]["before"], refs[r], rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(res[r]["final"], torch.stack(refs).mean(0), rtol=1e-5,
                                   atol=1e-6)
    assert res[0]["metrics"]["averages"] == steps // k
    assert res[0]["metrics"]["avg_period"] == k


def test_post_local_sgd_is_ssgd_then_ma(tmp_path):
    """--post-local-after 4, K = 3, 8 steps: averages after steps 1, 2, 3, 4 (synchronous),
    then 6 (local blocks); and while it averages every step it is ssgd, momentum included."""
    sc = {"lr": 0.1, "momentum": 0.5, "history": True}
    res = ok(run_learners({**sc, "algo": "ma", "steps": 8, "options": {
        "avg_period": 3, "post_local_after": 4}}, 2, tmp_path / "ma"))
    refs = blocks_reference(8, 3, 2, every_until=4)
    for r in range(2):
        torch.testing.assert_close(res[r]["before"], refs[r], rtol=1e-5, atol=1e-6)
    assert res[0]["metrics"]["averages"] == 5
    ssgd = ok(run_learners({**sc, "algo": "ssgd", "steps": 4}, 2, tmp_path / "ssgd"))
    for k in range(1, 5):
        torch.testing.assert_close(res[0]["history"][k], ssgd[0]["history"][k], rtol=1e-5,
                                   atol=1e-6)
    assert not torch.allclose(res[0]["history"][5], res[1]["history"][5])  # local from step 5


@pytest.mark.parametrize("algo,n", [(a, 4) for a in ADPSGD] + [("adpsgd-random", 3)])
def test_adpsgd_lr0_keeps_the_mean_and_shrinks_the_distance(tmp_path, algo, n):
    res = ok(run_learners({"algo": algo, "lr": 0.0, "steps": 30, "init": "rank",
                           "compute_s": 0.002}, n, tmp_path))
    start = torch.stack([r["history"][0] for r in res])
    mean0 = start.mean(0)
    for r in res:  # finalize exports the mean of the learners' weights after all exchanges
        torch.testing.assert_close(r["final"], mean0, rtol=0, atol=1e-6)
    # The distance is taken on the active learners: each of their 30 exchanges is merged before
    # their last step, while a passive one that finished early (a loaded machine) has merges
    # still pending that only finalize applies.
    actives = [r for i, r in enumerate(res) if i % 2 == 1]
    end = torch.stack([r["before"] for r in actives])
    assert (end - mean0).norm(dim=1).max() < 0.5 * (start - mean0).norm(dim=1).min()
    assert all(r["state"]["exchanges"] == 30 for r in actives)


def test_a_passive_learner_serves_its_weights_before_its_first_step(tmp_path):
    """The active learner's first exchange reaches the passive one before that has taken a
    step: it must swap the passive's starting weights (it once swapped zeros)."""
    res = ok(run_learners({"algo": "adpsgd-fixed", "lr": 0.0, "steps": 1, "init": "rank",
                           "late_rank": 0, "history": True}, 2, tmp_path))
    mean0 = (res[0]["history"][0] + res[1]["history"][0]) / 2
    torch.testing.assert_close(res[1]["history"][1], mean0, rtol=0, atol=1e-6)


def test_delay1_applies_each_gradient_exactly_one_step_late(tmp_path):
    res = ok(run_learners({"algo": "adpsgd-delay1", "lr": 0.05, "steps": 6,
                           "record_grads": True}, 2, tmp_path))
    for r in res:
        assert r["applied"][0] is None  # step 0 applies no gradient
        for k in range(1, 6):
            assert torch.equal(r["applied"][k], r["computed"][k - 1])
    assert res[1]["metrics"]["staleness_max"] >= 1  # the active learner merged its exchange


def test_checkpoint_holds_the_exchange_in_flight_and_counts_it(tmp_path):
    """delay1 keeps step k's exchange in flight past step k: sync merges it before the save, so
    the saved count of merged exchanges includes it (the active learner merged one per step)."""
    ok(run_learners({"algo": "adpsgd-delay1", "lr": 0.05, "steps": 8, "checkpoint_at": 5},
                    2, tmp_path))
    saved = torch.load(tmp_path / "ckpt1.pt", weights_only=False)
    assert saved["strategy"]["merged"] == saved["strategy"]["exchanges"] == 5


@pytest.mark.parametrize("algo", ["adpsgd-fixed", "adpsgd-delayavg"])
def test_plain_adpsgd_applies_the_fresh_gradient(tmp_path, algo):
    res = ok(run_learners({"algo": algo, "lr": 0.05, "steps": 4,
                           "record_grads": True}, 2, tmp_path))
    for r in res:
        for k in range(4):
            assert torch.equal(r["applied"][k], r["computed"][k])


@pytest.mark.parametrize("n", [2, 3, 4, 5])
def test_random_ring_1000_exchanges_no_deadlock(tmp_path, n):
    res = ok(run_learners({"algo": "adpsgd-random", "lr": 0.0, "steps": 1000, "init": "rank"},
                          n, tmp_path, timeout=90))
    for i, r in enumerate(res):
        if i % 2 == 1:
            assert r["state"]["exchanges"] == 1000
    start = torch.stack([r["history"][0] for r in res]).mean(0)
    torch.testing.assert_close(res[0]["final"], start, rtol=0, atol=1e-6)


def test_hadpsgd_two_nodes_of_two(tmp_path):
    sc = {"algo": "hadpsgd", "lr": 0.05, "momentum": 0.5, "steps": 12, "compute_s": 0.002,
          "options": {"learners_per_node": 2, "hadpsgd_variant": "random"}}
    res = ok(run_learners(sc, 4, tmp_path))
    # a node's learners allreduce gradients and share every merged average: identical weights
    assert torch.equal(res[0]["before"], res[1]["before"])
    assert torch.equal(res[2]["before"], res[3]["before"])
    assert not torch.equal(res[0]["before"], res[2]["before"])
    assert all(torch.equal(r["final"], res[0]["final"]) for r in res)  # one exported average
    assert res[0]["metrics"]["exchanges"] > 0 and res[1]["metrics"]["exchanges"] == 0


@pytest.mark.parametrize("variant", ["fixed", "delay1"])
def test_hadpsgd_lr0_averages_the_super_learners(tmp_path, variant):
    sc = {"algo": "hadpsgd", "lr": 0.0, "steps": 20, "init": "rank", "compute_s": 0.002,
          "options": {"learners_per_node": 2, "hadpsgd_variant": variant}}
    res = ok(run_learners(sc, 4, tmp_path))
    leaders = torch.stack([res[0]["history"][0], res[2]["history"][0]])  # DDP: leader's init
    torch.testing.assert_close(res[1]["final"], leaders.mean(0), rtol=0, atol=1e-6)
    assert (res[0]["before"] - res[2]["before"]).norm() < 0.1 * (leaders[0] - leaders[1]).norm()
