"""Slow-learner injection: the option and the stretched compute phase."""

from __future__ import annotations

import time

import pytest

from asrdist.errors import AsrdistError
from asrdist.parallel.rules.slow import SlowDown, parse_slow_learner


def test_slow_learner_option():
    assert parse_slow_learner("1:3") == (1, 3.0)
    assert parse_slow_learner(None) is None
    for bad in ("1", "x:2", "1:0.5"):
        with pytest.raises(AsrdistError, match="--slow-learner"):
            parse_slow_learner(bad)


def test_slowdown_stretches_the_compute_phase():
    slow = SlowDown(3.0)
    slow.start()
    time.sleep(0.05)
    t0 = time.perf_counter()
    extra = slow.stop()
    assert 0.09 <= extra <= 0.2 and time.perf_counter() - t0 >= extra


def test_only_the_named_learner_is_slowed():
    assert SlowDown.of_learner("1:3", 1).factor == 3.0
    assert SlowDown.of_learner("1:3", 0).factor == 1.0
    assert SlowDown.of_learner("", 0).factor == 1.0
