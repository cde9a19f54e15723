"""A lost learner in the simulator (scenario ``lost:RANK@FRACTION``): what real processes do.

Elastic strategies drop it and the survivors finish and export their own average; fail-stop
ones end the run at the loss, marked failed; no strategy hangs on a collective the lost learner
never reaches. Expected values come from a hand argument: at lr = 0 pairwise averaging only
moves weight between learners, so the survivors end with everything the run started with less
what the lost learner held when it was lost (a swap still in flight then is lost for both).
"""

from __future__ import annotations

import pytest
import torch

from asrdist.errors import AsrdistError
from asrdist.parallel import registry
from asrdist.simulate.run import simulate
from asrdist.simulate.speed import SpeedModel
from tests.parallel._learner import make_model
from tests.parallel.conftest import run_learners
from tests.simulate.test_run import MULTI, _node_options, mse, sgd

STEPS = 12


def _heldout(model: torch.nn.Module) -> dict[str, float]:
    with torch.no_grad():
        return {"heldout_ce": float(mse(7, 99, model))}


def test_an_elastic_run_drops_the_lost_learner_and_the_survivors_keep_what_it_left_them():
    """adpsgd-random, 6 learners, learner 0 lost after half of its steps; swaps slower than a
    step (2 s against 1 s) so that one is in flight at the loss: a survivor that merged its
    half of it would hold some of learner 0's weights (checked by breaking that: the sum is
    then off by 0.3)."""
    n, lost = 6, 0
    sim = simulate("adpsgd-random", n, STEPS, make_model, sgd(0.0), mse,
                   speed=SpeedModel(jitter=0.3, latency_s=2.0), keep_history=True,
                   lost={lost: 0.5})
    assert [len(h) for h in sim.history] == [STEPS // 2] + [STEPS] * (n - 1)
    (gone,) = sim.summary["departures"]
    assert (gone["learner"], gone["step"]) == (lost, STEPS // 2)
    assert "failed" not in sim.summary and sim.summary["swaps_lost"] >= 1
    # lr 0: the survivors hold all the start's weight but what learner 3 took with it
    kept = torch.stack(sim.start).sum(0) - sim.learners[lost]
    torch.testing.assert_close(sim.final * (n - 1), kept, rtol=0, atol=1e-5)
    assert not torch.allclose(sim.final, torch.stack(sim.start).mean(0))  # it mattered


def test_an_elastic_run_exports_the_survivors_mean_with_training_too():
    """lr > 0, learner 0 (whose weights a run exports) lost after 3 steps: the survivors are
    evaluated on schedule, and the last record, marked final, is of the export, which a
    survivor holds."""
    sim = simulate("adpsgd-fixed", 4, STEPS, make_model, sgd(0.01), mse,
                   speed=SpeedModel(jitter=0.3, latency_s=0.2), lost={0: 0.25},
                   eval_fn=_heldout, eval_every=2)
    assert sim.summary["departures"][0]["step"] == 3
    # every 2 steps of the survivors (all of them, their mean, till their last): the lost
    # learner's 9 missing steps hold none back
    steps = [r["steps"] for r in sim.records]
    assert len(steps) == 6 and steps[-1] == STEPS
    assert all(2 * k <= s < 2 * k + 1 for k, s in enumerate(steps[:-1], 1))
    assert sim.records[-1]["final"] and "failed" not in sim.summary
    model = make_model(0)
    torch.nn.utils.vector_to_parameters(sim.final, model.parameters())
    assert sim.records[-1]["heldout_ce"] == pytest.approx(_heldout(model)["heldout_ce"])


def test_a_hierarchical_node_that_loses_a_learner_leaves_whole():
    """hadpsgd, nodes of 2: learner 3 lost, its node mate 2 leaves at its next node
    allreduce (it failed, at the same step), the other two nodes finish and export."""
    sim = simulate("hadpsgd", 6, STEPS, make_model, sgd(0.0), mse,
                   options={"learners_per_node": 2}, speed=SpeedModel(jitter=0.3),
                   keep_history=True, lost={3: 0.5})
    left = {d["learner"]: d["step"] for d in sim.summary["departures"]}
    assert left == {3: STEPS // 2, 2: STEPS // 2}
    assert [len(h) for h in sim.history] == [STEPS, STEPS, 6, 6, STEPS, STEPS]
    torch.testing.assert_close(sim.learners[2], sim.learners[3], rtol=0, atol=0)  # one node
    assert "failed" not in sim.summary and sim.final.numel() == sim.learners[2].numel()
    # (no sum to check by hand here: swaps that reached node 1's leader before it left but
    # that it had not merged yet leave with it, as they do on processes)


def test_a_server_strategy_goes_on_without_a_learner_but_not_without_its_host():
    ok = simulate("diloco-async", 3, STEPS, make_model, sgd(0.1), mse,
                  options={"avg_period": 2}, keep_history=True, lost={2: 0.5})
    assert [len(h) for h in ok.history] == [STEPS, STEPS, STEPS // 2]
    assert "failed" not in ok.summary and ok.final.numel() > 0
    host = simulate("diloco-async", 3, STEPS, make_model, sgd(0.1), mse,
                    options={"avg_period": 2}, lost={0: 0.5})
    assert host.summary["failed"]["learner"] == 0
    assert "holds the outer state" in host.summary["failed"]["why"]
    assert host.final.numel() == 0


@pytest.mark.parametrize("algo", MULTI)
@pytest.mark.parametrize("lost", [0, 3])
def test_no_strategy_hangs_on_a_lost_learner(algo, lost):
    """Every registered strategy, learner 0 or 3 of 4 lost after 5 of 10 steps: an elastic
    one finishes with the survivors (a server's lost host ends it), any other ends at the
    loss, failed, with no final record and no export."""
    sim = simulate(algo, 4, 10, make_model, sgd(0.05), mse, options=_node_options(algo, 4),
                   speed=SpeedModel(jitter=0.3, latency_s=0.1), lost={lost: 0.5},
                   eval_fn=_heldout, eval_every=2)
    loss = sim.summary["departures"][0]
    assert (loss["learner"], loss["step"]) == (lost, 5)
    host_lost = algo == "diloco-async" and lost == 0
    if registry.spec(algo).elastic and not host_lost:
        assert "failed" not in sim.summary and sim.records[-1].get("final")
    else:
        assert sim.summary["failed"]["time_s"] == pytest.approx(loss["time_s"])
        assert sim.summary["time_s"] == pytest.approx(loss["time_s"])
        assert not any(r.get("final") for r in sim.records) and sim.final.numel() == 0


def test_a_lost_learner_must_be_one_of_them_at_a_fraction_inside_the_run():
    for lost in ({4: 0.5}, {1: 1.0}, {1: 0.0}):
        with pytest.raises(AsrdistError, match="lost learner"):
            simulate("adpsgd-fixed", 4, 4, make_model, sgd(0.1), mse, lost=lost)
    with pytest.raises(AsrdistError, match="a run of 1 steps a learner ends before it is lost"):
        simulate("adpsgd-fixed", 4, 1, make_model, sgd(0.1), mse, lost={1: 0.5})


def test_a_killed_learner_s_run_agrees_with_real_processes(tmp_path):
    """diloco-async (elastic), 2 learners, blocks of 2: learner 1 starts late (processes) or
    is 100x slower (simulator), so learner 0's four pushes come first; learner 1 pushes twice
    and is killed (SIGKILL) or lost after 4 of its 8 steps. Learner 0 alone survives and
    exports its own weights, the same on both sides. (ADPSGD cannot be compared so: which of
    its swaps a kill interrupts depends on when the survivors notice it, a wall-clock matter.)"""
    sc = {"algo": "diloco-async", "lr": 0.1, "momentum": 0.5, "steps": 8, "init": "rank",
          "late_rank": 1, "late_s": 1.5, "kill_at": 4, "kill_rank": 1, "timeout_s": 5.0,
          "options": {"elastic": True, "avg_period": 2}}
    run = run_learners(sc, 2, tmp_path, timeout=60)
    assert run.codes == [0, -9], run.stderr[0][-2000:]
    sim = simulate("diloco-async", 2, 8, make_model, sgd(0.1, 0.5), mse,
                   options={"avg_period": 2}, speed=SpeedModel(slow={1: 100.0}),
                   keep_history=True, lost={1: 0.5})
    assert [len(h) for h in sim.history] == [8, 4]
    torch.testing.assert_close(sim.final, run.results[0]["final"], rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(sim.learners[0], run.results[0]["before"], rtol=1e-5, atol=1e-6)
