from __future__ import annotations

import math

import numpy as np
import pytest

from asrdist.errors import AsrdistError
from asrdist.simulate.speed import SpeedModel


def test_jitter_has_mean_one_and_the_slow_learner_its_factor():
    speed = SpeedModel.with_slow("2:3", compute_s=2.0, jitter=0.2, seed=1)
    times = np.array([speed.step_s(0, k) for k in range(4000)])
    assert times.mean() == pytest.approx(2.0, rel=0.02)
    assert times.std() / times.mean() == pytest.approx(0.2, rel=0.1)
    assert speed.step_s(0, 7) != speed.step_s(1, 7)  # learners draw their own jitter
    assert speed.step_s(0, 7) == SpeedModel(compute_s=2.0, jitter=0.2, seed=1).step_s(0, 7)
    steady = SpeedModel.with_slow("2:3", compute_s=2.0)
    assert (steady.step_s(2, 9), steady.step_s(5, 9)) == (6.0, 2.0)


def test_link_costs():
    speed = SpeedModel(latency_s=0.01, bandwidth=1e6)
    assert speed.send_s(10**6) == pytest.approx(1.01)
    assert speed.allreduce_s(10**6, 1) == 0.0
    assert speed.allreduce_s(10**6, 4) == pytest.approx(6 * 0.01 + 1.5)
    assert SpeedModel().send_s(10**9) == 0.0 and math.isinf(SpeedModel().bandwidth)


def test_bad_values_and_specs():
    with pytest.raises(AsrdistError, match="slow-learner"):
        SpeedModel.with_slow("two:3")
    with pytest.raises(AsrdistError, match="bandwidth"):
        SpeedModel(bandwidth=0)
