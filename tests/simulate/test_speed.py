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
    assert speed.send_s(10**6, 0, 1) == pytest.approx(1.01)
    assert speed.allreduce_s(10**6, 1) == 0.0
    assert speed.allreduce_s(10**6, 4) == pytest.approx(6 * 0.01 + 1.5)
    assert speed.allreduce_s(10**6, (0, 1, 2, 3)) == pytest.approx(6 * 0.01 + 1.5)
    assert SpeedModel().send_s(10**9, 0, 1) == 0.0 and math.isinf(SpeedModel().bandwidth)


def test_node_and_cross_node_links_by_hand():
    """Nodes of 4: within one, 1 ms and 100 MB/s; across, 10 ms and 1 MB/s."""
    speed = SpeedModel(latency_s=0.01, bandwidth=1e6, node_size=4, node_latency_s=0.001,
                       node_bandwidth=1e8)
    assert speed.send_s(10**6, 0, 3) == pytest.approx(0.001 + 0.01)
    assert speed.send_s(10**6, 3, 4) == pytest.approx(0.01 + 1.0)
    # a node's ring: 6 steps of a quarter of 4 MB over the node link
    assert speed.allreduce_s(4 * 10**6, (4, 5, 6, 7)) == pytest.approx(6 * (0.001 + 0.01))
    # two nodes' ring: 14 steps of an eighth, each as slow as its cross-node hops
    assert speed.allreduce_s(4 * 10**6, range(8)) == pytest.approx(14 * (0.01 + 0.5))
    # every member sends 2 (n-1)/n of the tensor: 7 MB; hops 3->4 and 7->0 cross nodes
    assert speed.ring_bytes(4 * 10**6, range(8)) == pytest.approx((6 * 7e6, 2 * 7e6))
    assert speed.ring_bytes(4 * 10**6, (0, 1)) == pytest.approx((2 * 4e6, 0))
    assert SpeedModel().ring_bytes(10, (0, 1, 2)) == pytest.approx((0, 3 * 2 / 3 * 2 * 10))


def test_a_gradient_allreduce_hides_its_overlap_behind_backward():
    speed = SpeedModel(overlap=0.5)
    assert speed.exposed_s(2.0, 0.6) == pytest.approx(1.4)  # the backward was shorter
    assert speed.exposed_s(2.0, 5.0) == pytest.approx(1.0)  # half of it, the overlap's cap
    assert SpeedModel().exposed_s(2.0, 5.0) == 2.0  # one bucket: nothing hidden


def test_several_stragglers():
    speed = SpeedModel.with_slow("1:3, 5:2", compute_s=2.0)
    assert [speed.step_s(r, 0) for r in (0, 1, 5)] == [2.0, 6.0, 4.0]
    assert SpeedModel.with_slow("").slow == {} and SpeedModel.with_slow(None).slow == {}
    with pytest.raises(AsrdistError, match="learner 1 named twice"):
        SpeedModel.with_slow("1:3,1:2")


def test_bad_values_and_specs():
    with pytest.raises(AsrdistError, match="slow-learner"):
        SpeedModel.with_slow("two:3")
    with pytest.raises(AsrdistError, match="bandwidth"):
        SpeedModel(bandwidth=0)
    with pytest.raises(AsrdistError, match="--overlap must be in"):
        SpeedModel(overlap=1.5)
