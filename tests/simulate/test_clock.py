from __future__ import annotations

import pytest

from asrdist.simulate.clock import Clock, Meeting


def test_processes_run_in_time_order_and_meetings_wait_for_the_last():
    clock, log = Clock(), []
    meeting = Meeting((0, 1), cost_s=0.5, action=lambda: log.append(("met", clock.now)))

    def proc(pid: int, compute: float):
        yield clock.now + compute
        log.append((pid, clock.now))
        yield meeting
        log.append((pid, clock.now))

    clock.spawn(0, proc(0, 1.0))
    clock.spawn(1, proc(1, 3.0))
    clock.run()
    assert log == [(0, 1.0), (1, 3.0), ("met", 3.0), (0, 3.5), (1, 3.5)]
    assert clock.waited == {0: 2.5, 1: 0.5}


def test_an_action_may_set_the_meetings_cost():
    clock = Clock()

    def proc():
        yield Meeting((0,), cost_s=9.0, action=lambda: 2.0)

    clock.spawn(0, proc())
    clock.run()
    assert clock.now == 2.0


def test_a_meeting_that_never_completes_is_an_error():
    clock = Clock()

    def proc():
        yield Meeting((0, 1), cost_s=0.0)

    clock.spawn(0, proc())
    with pytest.raises(RuntimeError, match=r"processes \[0\]"):
        clock.run()
