"""The simulator's guards: the start-up cost line, short epochs and divergence."""

from __future__ import annotations

import math

import pytest

from asrdist.simulate import guards
from asrdist.simulate.speed import SpeedModel


def test_the_cost_line_says_what_a_step_and_an_exchange_cost():
    speed = SpeedModel(compute_s=2.0, update_s=0.5, latency_s=0.1, bandwidth=1e6,
                       slow={3: 4.0})
    cost = guards.step_cost(speed, 4, 2_000_000)
    assert cost == pytest.approx({"compute_s": 2.0, "update_s": 0.5, "message_s": 2.1,
                                  "allreduce_s": 6 * 0.1 + 1.5 * 2.0,
                                  "gradient_allreduce_s": 3.6})
    line = guards.cost_line(speed, 4, 2_000_000)
    assert "a step computes 2 s + 0.5 s update; learner 3 4x slower" in line
    assert "the model's 2 MB: 2.1 s a message, 3.6 s a ring allreduce of 4 (1.44x" in line


def test_the_cost_line_says_what_nodes_and_overlap_save():
    """Two nodes of 2: across them 0.1 s and 1 MB/s, within them free; half of a gradient
    allreduce may overlap a backward of 2/3 x 3 s."""
    speed = SpeedModel(compute_s=3.0, latency_s=0.1, bandwidth=1e6, node_size=2, overlap=0.5)
    cost = guards.step_cost(speed, 4, 2_000_000)
    allreduce = 6 * (0.1 + 0.5)  # 6 steps of 0.5 MB, each paced by the hops across nodes
    assert cost == pytest.approx({"compute_s": 3.0, "update_s": 0.0, "message_s": 2.1,
                                  "allreduce_s": allreduce,
                                  "gradient_allreduce_s": allreduce / 2,
                                  "node_message_s": 0.0, "node_allreduce_s": 0.0})
    line = guards.cost_line(speed, 4, 2_000_000)
    assert "3.6 s a ring allreduce of 4 (1.2x its compute), 1.8 s of it after backward in " \
        "a gradient mean (overlap 0.5); nodes of 2: 0 s a message, 0 s a node's allreduce" \
        in line


def test_a_free_link_is_said_to_be_free():
    line = guards.cost_line(SpeedModel(), 16, 1000)
    assert "communication is free (--latency 0, --bandwidth inf)" in line
    assert guards.free_link(SpeedModel(node_size=4))
    assert not guards.free_link(SpeedModel(node_size=4, node_latency_s=1e-6))
    assert not guards.free_link(SpeedModel(bandwidth=1e9))


def test_short_epochs_are_warned_of():
    assert guards.few_steps(guards.FEW_STEPS, 16, 4) is None
    assert "an epoch is only 3 steps of 16 learners x 4 chunks" in guards.few_steps(3, 16, 4)


def test_divergence_is_a_ce_above_twice_its_lowest_so_far_or_not_finite():
    def records(*ces: float) -> list[dict[str, float]]:
        return [{"steps": 10.0 * k, "heldout_ce": ce} for k, ce in enumerate(ces)]

    assert guards.diverged([]) is None
    assert guards.diverged(records(3.5, 2.0, 3.9)) is None
    assert "10.5 at step 20, more than 2x its lowest before, 3.5 at step 0" in \
        guards.diverged(records(3.5, 4.0, 10.5))
    # learned, then blew up, still below twice the start (bmuf's default at 16 learners)
    assert "8.855 at step 30, more than 2x its lowest before, 3.454 at step 20" in \
        guards.diverged(records(5.19, 3.86, 3.454, 8.855, 7.706))
    assert "nan at step 10" in guards.diverged(records(3.5, math.nan))
