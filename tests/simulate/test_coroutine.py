"""A plain function as a clock process: it may wait from deep inside its calls (a strategy's
hook), and the clock still runs the learners one at a time, in simulated-time order."""

from __future__ import annotations

import pytest

from asrdist.simulate.clock import Clock, Meeting
from asrdist.simulate.coroutine import Coroutine


def test_waits_from_nested_calls_run_in_clock_order_one_thread_at_a_time():
    clock, log, holding = Clock(), [], set()
    meeting = Meeting((0, 1), cost_s=0.5)

    def compute(turn: Coroutine, pid: int, seconds: float) -> None:  # a callee that blocks
        holding.discard(pid)
        turn.wait(clock.now + seconds)
        holding.add(pid)
        assert holding == {pid}  # no other learner's thread runs meanwhile

    def learner(pid: int, seconds: float):
        def fn(turn: Coroutine) -> None:
            holding.add(pid)
            for _ in range(2):
                compute(turn, pid, seconds)
                log.append((pid, clock.now))
            holding.discard(pid)
            turn.wait(meeting)
            log.append((pid, "met", clock.now))
        return fn

    for pid, seconds in ((0, 1.0), (1, 1.5)):
        clock.spawn(pid, Coroutine(learner(pid, seconds), f"t{pid}").process())
    clock.run()
    assert log == [(0, 1.0), (1, 1.5), (0, 2.0), (1, 3.0), (0, "met", 3.5), (1, "met", 3.5)]
    assert clock.waited == {0: 1.5, 1: 0.5}


def test_an_error_in_the_function_is_raised_by_the_clock():
    clock = Clock()

    def fails(turn: Coroutine) -> None:
        turn.wait(1.0)
        raise KeyError("utterance u7")

    clock.spawn(0, Coroutine(fails, "t").process())
    with pytest.raises(KeyError, match="u7"):
        clock.run()
