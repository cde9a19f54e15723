"""The simulator against the real learner processes where both are deterministic, and against
plain SGD, the outer optimizers' definitions and the ring schedule's averaging matrices.

The simulator has no code of its own per strategy: each learner runs its registered strategy
on the clock's transport. So every registered strategy (test_toy_strategy's plugin included,
which tests.parallel.conftest registers) is run here with several learners, and every one is
checked against real processes: the synchronous ones step by step, the asynchronous ones at
lr = 0 with one active learner (the order of exchanges is then the ring schedule's whatever
the timing).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from asrdist.errors import AsrdistError
from asrdist.parallel import registry
from asrdist.parallel.registry import algo_names
from asrdist.parallel.rules import rings
from asrdist.parallel.rules.weights import flat_weights
from asrdist.simulate.run import simulate
from asrdist.simulate.speed import SpeedModel
from tests.parallel._learner import batch, make_model
from tests.parallel.conftest import ok, run_learners
from tests.parallel.test_outer import _bmuf_reference, _diloco_reference
from tests.parallel.test_strategies import blocks_reference, plain_sgd

MULTI = [name for name, spec in registry.specs().items() if spec.multi_learner]
SYNCHRONOUS = [  # (algo, learners, options): every learner at every step, any timing
    ("ssgd", 2, {}), ("ssgd", 4, {}), ("ma", 2, {"avg_period": 3}), ("ma", 3, {"avg_period": 2}),
    ("bmuf", 3, {"avg_period": 2}), ("bmuf", 2, {"avg_period": 3, "bmuf_nesterov": False}),
    ("diloco", 3, {"avg_period": 2}), ("toy-average", 3, {"toy_every": 2}),
    ("streaming-diloco", 3, {"avg_period": 4, "stream_alpha": 0.5}),  # fragments 2, tau 1
    ("streaming-diloco", 2, {"avg_period": 3, "stream_fragments": 3, "stream_delay": 2,
                             "stream_alpha": 0.0}),
    ("streaming-diloco", 2, {"avg_period": 3, "compress": "int8"}),
    ("ma", 2, {"avg_period": 3, "post_local_after": 4}),  # post-local SGD
]
ASYNCHRONOUS = [  # (algo, learners, options): one active learner on the ring
    ("adpsgd-fixed", 3, {}), ("adpsgd-random", 3, {}), ("adpsgd-delay1", 3, {}),
    ("adpsgd-delayavg", 3, {}),
    ("hadpsgd", 6, {"learners_per_node": 2, "hadpsgd_variant": "random"}),
    ("hadpsgd", 6, {"learners_per_node": 2, "hadpsgd_variant": "delay1"}),
]


ORDERED = [  # (algo, learners, options): a server's pushes, in an order fixed by a late start
    ("diloco-async", 2, {"avg_period": 2}),
    ("diloco-async", 2, {"avg_period": 2, "async_quorum": 2}),
    ("diloco-async", 2, {"avg_period": 2, "compress": "int8"}),
]


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


def test_every_registered_strategy_is_checked_against_real_processes():
    """A strategy registered without a case here (a new one, a plugin) fails this test."""
    assert set(MULTI) == {algo for algo, _, _ in SYNCHRONOUS + ASYNCHRONOUS + ORDERED}


def _node_options(algo: str, n: int) -> dict[str, int]:
    """Learners per node, for a strategy that takes it: the simulator has no launcher's nodes."""
    return {"learners_per_node": n // 2} if "learners_per_node" in registry.options_of(algo) \
        else {}


@pytest.mark.parametrize("algo", MULTI)
def test_every_registered_strategy_runs_with_several_learners_and_keeps_their_mean(algo):
    """lr = 0: averaging of any kind keeps the mean of the weights the learners start from
    (once wrapped: a gradient-averaging group starts from its first member's), and the run
    exports it; every learner takes every step, and the clock moves."""
    n, steps = 4, 7
    sim = simulate(algo, n, steps, make_model, sgd(0.0), mse, options=_node_options(algo, n),
                   speed=SpeedModel(jitter=0.5, latency_s=0.05), keep_history=True)
    mean = torch.stack(sim.start).mean(0)
    torch.testing.assert_close(sim.final, mean, rtol=0, atol=1e-6)
    assert [len(h) for h in sim.history] == [steps] * n
    assert sim.summary["time_s"] >= steps


def test_a_strategy_that_refuses_several_learners_is_refused():
    with pytest.raises(AsrdistError, match="--algo single trains one learner, not 2"):
        simulate("single", 2, 1, make_model, sgd(0.1), mse)


@pytest.mark.parametrize("algo,n,options", SYNCHRONOUS)
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


@pytest.mark.parametrize("algo,n,options", ASYNCHRONOUS)
def test_asynchronous_lr0_same_consensus_rounds_as_real_processes(tmp_path, algo, n, options):
    """One active learner on the ring (three learners, or three super-learners), so the order
    of exchanges is the ring schedule's whatever the timing; the active learner's weights after
    every step are the real one's, and so is the exported mean."""
    steps = 9
    options = {"seed": 3, **options}
    real = ok(run_learners({"algo": algo, "lr": 0.0, "steps": steps, "init": "rank",
                            "compute_s": 0.002, "history": True, "options": options},
                           n, tmp_path))
    sim = simulate(algo, n, steps, make_model, sgd(0.0), mse, options=options,
                   speed=SpeedModel(jitter=0.5, latency_s=0.3), keep_history=True)
    active = n // 3  # ring member 1: learner 1, or the leader of the second node
    moved = [not torch.allclose(sim.history[active][k], sim.history[active][k + 1])
             for k in range(3)]
    assert any(moved)  # exchanges did change the active learner's weights
    for r in range(n):
        torch.testing.assert_close(sim.start[r], real[r]["history"][0], rtol=0, atol=0)
    for k in range(steps):
        torch.testing.assert_close(sim.history[active][k], real[active]["history"][k + 1],
                                   rtol=0, atol=1e-6)
    torch.testing.assert_close(sim.final, torch.stack(sim.start).mean(0), rtol=0, atol=1e-6)
    torch.testing.assert_close(real[0]["final"], sim.final, rtol=0, atol=1e-6)


@pytest.mark.parametrize("algo,n,options", ORDERED)
def test_server_strategies_agree_with_real_processes_in_a_fixed_order_of_pushes(tmp_path, algo,
                                                                               n, options):
    """The last learner starts 1.5 s late on processes and computes 100x slower in the
    simulator: every other learner's pushes reach the server before its first, the same order
    on both sides; every learner's weights after every step and the export agree."""
    steps, late = 4, n - 1
    real = ok(run_learners({"algo": algo, "lr": 0.1, "momentum": 0.5, "steps": steps,
                            "init": "rank", "late_rank": late, "late_s": 1.5, "history": True,
                            "options": options}, n, tmp_path))
    sim = simulate(algo, n, steps, make_model, sgd(0.1, 0.5), mse, options=options,
                   speed=SpeedModel(slow={late: 100.0}, latency_s=0.01), keep_history=True)
    for r in range(n):
        torch.testing.assert_close(sim.start[r], real[r]["history"][0], rtol=0, atol=1e-6)
        for k in range(steps):
            torch.testing.assert_close(sim.history[r][k], real[r]["history"][k + 1],
                                       rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(sim.final, real[0]["final"], rtol=1e-5, atol=1e-6)
    assert not torch.equal(sim.learners[0], sim.learners[late])


@pytest.mark.parametrize("algo,n,options,outer", [
    ("bmuf", 3, {}, _bmuf_reference(3, 2 / 3, 1.0, True)),
    ("bmuf", 4, {"bmuf_momentum": 0.75, "bmuf_lr": 0.8, "bmuf_nesterov": False},
     _bmuf_reference(4, 0.75, 0.8, False)),
    ("diloco", 3, {}, _diloco_reference(0.7, 0.9)),
    ("diloco", 4, {"diloco_lr": 0.5, "diloco_momentum": 0.5}, _diloco_reference(0.5, 0.5)),
])
def test_outer_optimizers_follow_their_definition(algo, n, options, outer):
    """bmuf and diloco with several learners: the plain reference loop of their definition
    (ma's blocks, then ``outer(start, mean)`` as the next start), two blocks and a half."""
    k, steps = 3, 8
    sim = simulate(algo, n, steps, lambda i: make_model(0), sgd(0.1, 0.5), mse,
                   options={"avg_period": k, **options},
                   speed=SpeedModel(jitter=0.5, latency_s=0.01))
    refs = blocks_reference(steps, k, n, outer)
    for r in range(n):
        torch.testing.assert_close(sim.learners[r], refs[r], rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(sim.final, torch.stack(refs).mean(0), rtol=1e-5, atol=1e-6)
    assert not torch.equal(sim.learners[0], sim.learners[1])  # the last block is local


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
                   epoch_steps=4, speed=SpeedModel(compute_s=0.5), options={"avg_period": 3},
                   eval_start=True)
    assert [r["steps"] for r in sim.records] == [0, 2, 4, 6]
    assert [r["epochs"] for r in sim.records] == [0, 1, 2, 3]
    assert [r["time_s"] for r in sim.records] == [0.0, 1.0, 2.0, 3.0]
    assert [r.get("final", False) for r in sim.records] == [False, False, False, True]
    assert sim.records[-1]["dist_to_mean"] == pytest.approx(0.0, abs=1e-6)  # averaged at 6
    assert sim.records[1]["dist_to_mean"] > 0
    start = torch.stack([flat_weights(make_model(i)) for i in range(2)]).mean(0)
    torch.testing.assert_close(seen[0], start)  # the learners' mean before any step
    assert torch.equal(seen[-1], sim.final)  # the exported weights themselves
    assert sim.summary["strategy"]["avg_period"] == 3  # what the strategy reports of itself


def test_the_last_record_follows_the_strategy_s_end_also_on_an_evaluation_step():
    """bmuf's final average is the plain mean, not a block step, and comes after the last
    step: the last record is of it whether or not an evaluation falls on the last step."""
    def run(every: int):
        return simulate("bmuf", 3, 6, make_model, sgd(0.1), mse, speed=SpeedModel(latency_s=1),
                        eval_fn=lambda m: {"ce": float(mse(0, 0, m))}, eval_every=every,
                        options={"avg_period": 4})

    on_step, off_step = run(3), run(4)
    assert [r["steps"] for r in on_step.records] == [3, 6]
    assert [r["steps"] for r in off_step.records] == [4, 6]
    for sim in on_step, off_step:
        assert sim.records[-1]["final"] and sim.records[-1]["time_s"] == sim.summary["time_s"]
    assert on_step.records[-1] == off_step.records[-1]
    assert on_step.summary["strategy"]["block_momentum"] == pytest.approx(2 / 3)


def test_bad_input_is_one_line_naming_the_option():
    with pytest.raises(AsrdistError, match="learners-per-node"):
        simulate("hadpsgd", 4, 1, make_model, sgd(0.1), mse)
    with pytest.raises(AsrdistError, match="avg_periodd"):
        simulate("ma", 2, 1, make_model, sgd(0.1), mse, options={"avg_periodd": 3})
    with pytest.raises(AsrdistError, match="learners"):
        simulate("ssgd", 0, 1, make_model, sgd(0.1), mse)


def test_ssgd_s_allreduce_overlaps_backward_by_hand():
    """2 learners, 3 s of compute (2 s of it backward), an allreduce of the gradients of 4 s:
    half of it may overlap, so 2 s of each step's is hidden. Time: the wrap's broadcast (4 s),
    3 steps of 3 s + the exposed allreduce, and the end's average of the weights (4 s) and
    4-byte vote; bytes: that broadcast, 4 allreduces of the model (each learner sends it
    once) and 2 x 4 bytes of the vote."""
    nbytes = sum(p.numel() * p.element_size() for p in make_model(0).parameters())
    bandwidth = nbytes / 4  # a ring of 2 moves the tensor once over the link: 4 s
    vote = 4 / bandwidth

    def run(overlap: float):
        return simulate("ssgd", 2, 3, make_model, sgd(0.1), mse,
                        speed=SpeedModel(compute_s=3.0, bandwidth=bandwidth, overlap=overlap))

    plain, overlapped = run(0.0), run(0.5)
    assert plain.summary["time_s"] == pytest.approx(4 + 3 * (3 + 4) + 4 + vote)
    assert overlapped.summary["time_s"] == pytest.approx(4 + 3 * (3 + 2) + 4 + vote)
    assert overlapped.summary["wait_s"] == pytest.approx([4 + 3 * 2] * 2)
    assert torch.equal(plain.final, overlapped.final)
    assert overlapped.summary["wire_bytes"] == {"node": 0.0,
                                                "cross": nbytes + 4 * 2 * nbytes + 2 * 4}


def test_hadpsgd_takes_the_speed_model_s_nodes_and_their_link():
    """Without --learners-per-node, hadpsgd's super-learners are the speed model's nodes (as
    they are the launcher's on processes), and their allreduces run at the node link."""
    options = {"hadpsgd_variant": "random"}
    fast_nodes = SpeedModel(node_size=2, latency_s=1.0, node_latency_s=0.1)
    by_speed = simulate("hadpsgd", 4, 6, make_model, sgd(0.1), mse, speed=fast_nodes,
                        options=options)
    by_option = simulate("hadpsgd", 4, 6, make_model, sgd(0.1), mse,
                         speed=SpeedModel(latency_s=1.0),
                         options={**options, "learners_per_node": 2})
    assert torch.equal(by_speed.final, by_option.final)
    assert torch.equal(by_speed.learners[0], by_speed.learners[1])
    assert by_speed.summary["time_s"] < by_option.summary["time_s"]
    assert by_option.summary["wire_bytes"]["node"] == 0
    wire = by_speed.summary["wire_bytes"]
    assert wire["node"] > 0 and wire["cross"] < by_option.summary["wire_bytes"]["cross"]
