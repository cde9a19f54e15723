"""A learner's time per phase: each report holds the figures since the last one."""

from __future__ import annotations

import time

from asrdist.parallel.rules.timing import StepTimes


def test_a_report_sums_the_phases_since_the_last_and_starts_again():
    times = StepTimes()
    times.begin_compute()
    time.sleep(0.02)
    times.end_compute(0.01)
    with times.waiting():
        time.sleep(0.02)
    times.staleness(1)
    times.staleness(3)
    first = times.report()
    assert first["fwd_bwd_s"] >= 0.02 and first["comm_wait_s"] >= 0.02
    assert first["slowdown_s"] == 0.01
    assert (first["staleness"], first["staleness_max"]) == (2, 3)
    assert times.report() == {"fwd_bwd_s": 0.0, "comm_wait_s": 0.0, "slowdown_s": 0.0}
