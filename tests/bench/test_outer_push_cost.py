"""bench.outer_push_cost at tiny size: both servers are forked processes that end once their
client is done (measure waits for each), the push going through the learners' own link."""

from __future__ import annotations

from bench import outer_push_cost


def test_a_tiny_model_s_transfer_and_push_are_timed_and_both_servers_end():
    bare, push = outer_push_cost.measure(1000, reps=2)
    assert 0 < bare < 5 and 0 < push < 5
