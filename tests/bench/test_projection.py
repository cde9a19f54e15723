"""The projection's step model and its reading of the network study (the CPU timing of the
paper-size BLSTM is the benchmark's job, not a test's)."""

from __future__ import annotations

import json

import pytest

from asrdist.errors import AsrdistError
from bench.projection import (
    ASSUMPTIONS,
    CALIBRATION,
    calibrated_t_frame,
    implied_factor,
    network_calibration,
    project,
    step_time,
    study1_limits,
)

NET = {"swap_efficiency": 0.5, "hidden": {"ssgd": 0.25, "adpsgd-fixed": 0.8,
                                          "adpsgd-random": 0.8, "adpsgd-delay1": 0.9,
                                          "hadpsgd": 0.85}}
MODEL_BYTES = 173e6
T_FRAME = 60e-6


def test_ssgd_allreduce_grows_with_learners_and_is_exposed_at_small_local_batch():
    small = step_time("ssgd", 16, T_FRAME, MODEL_BYTES, NET, ASSUMPTIONS)
    large = step_time("ssgd", 128, T_FRAME, MODEL_BYTES, NET, ASSUMPTIONS)
    assert large[0] < small[0]  # the global batch is capped: less compute per learner
    assert large[1] > small[1]  # and more exposed communication
    assert small[2] == large[2] == ASSUMPTIONS["batch_ssgd"]


def test_random_ring_loads_the_node_link_more_than_the_fixed_ring():
    fixed = step_time("adpsgd-fixed", 64, T_FRAME, MODEL_BYTES, NET, ASSUMPTIONS)
    rand = step_time("adpsgd-random", 64, T_FRAME, MODEL_BYTES, NET, ASSUMPTIONS)
    assert rand[1] > fixed[1] and rand[0] == fixed[0]


def test_slow_link_is_exposed_beyond_compute():
    slow = {**NET, "swap_efficiency": 0.0005}
    compute, exposed, _ = step_time("adpsgd-fixed", 16, T_FRAME, MODEL_BYTES, slow,
                                    ASSUMPTIONS)
    swap = MODEL_BYTES / (ASSUMPTIONS["link_gbit"] * 1e9 / 8 * 0.0005)
    assert exposed == pytest.approx(swap - 0.8 * compute)


def test_total_is_epochs_times_epoch():
    rows = project(T_FRAME, MODEL_BYTES, NET, ASSUMPTIONS)
    assert {r["gpus"] for r in rows} == {16, 32, 64, 128}
    for r in rows:
        assert r["total_h"] == pytest.approx(r["epoch_h"] * ASSUMPTIONS["epochs"])
    by = {(r["gpus"], r["algo"]): r["total_h"] for r in rows}
    assert by[(128, "adpsgd-delay1")] < by[(16, "adpsgd-delay1")]


def test_network_calibration_reads_the_fastest_link(tmp_path):
    path = tmp_path / "network.json"
    path.write_text(json.dumps({
        "bytes": 1_000_000,
        "probes": {"1gbit": {"swap_cross": 0.016}, "250mbit": {"swap_cross": 0.064}},
        "rows": [{"rate": "1gbit", "algo": "ssgd", "hidden": 0.3},
                 {"rate": "250mbit", "algo": "ssgd", "hidden": 0.1}]}))
    net = network_calibration(path)
    assert net["rate"] == "1gbit" and net["hidden"] == {"ssgd": 0.3}
    assert net["swap_efficiency"] == pytest.approx(0.5)


def test_network_calibration_errors_name_the_file(tmp_path):
    with pytest.raises(AsrdistError, match="network.json: missing"):
        network_calibration(tmp_path / "network.json")
    path = tmp_path / "network.json"
    path.write_text(json.dumps({"bytes": 1, "probes": {"fast": {"swap_cross": 1.0}},
                                "rows": []}))
    with pytest.raises(AsrdistError, match="'fast'"):
        network_calibration(path)


def test_calibrated_time_per_frame_is_one_week_over_16_epochs_of_swb2000():
    # by hand: 7 days = 604,800 s over 1975 h x 3600 s x 100 frames/s x 16 epochs
    assert calibrated_t_frame(CALIBRATION, ASSUMPTIONS) == pytest.approx(
        604_800 / (1975 * 3600 * 100 * 16))


def test_implied_factor_reproduces_the_p100_hours():
    f = implied_factor(T_FRAME, MODEL_BYTES, NET, ASSUMPTIONS, CALIBRATION, {})
    rows = project(T_FRAME * f * CALIBRATION["p100_slowdown"], MODEL_BYTES, NET, ASSUMPTIONS)
    got = next(r["total_h"] for r in rows if (r["gpus"], r["algo"]) == (16, "adpsgd-fixed"))
    assert got == pytest.approx(CALIBRATION["p100_hours"], rel=1e-6)


STUDY1 = """## Study 1: large batch (simulator)

Single-learner baseline at batch 16: CE 2.0537 (lr 0.0125).

| strategy | learners | B=64 (4x) | B=256 (16x) | largest B within 2 % |
|---|---|---|---|---|
| ssgd | 16 | 2.0 (lr 0.025) | 2.4 (lr 0.1) | 64 |
| adpsgd-fixed | 16 | 2.0 (lr 0.025) | 2.0 (lr 0.1) | 256 |
| adpsgd-fixed | 64 | - | 2.3 (lr 0.1) | none |
| hadpsgd | 16 | 2.4 (lr 0.025) | 2.5 (lr 0.1) | none |

| strategy | seeds | mean | sd |
|---|---|---|---|
| ssgd | 3 | 2.9103 | 0.0227 |

## Study 2
| ssgd | 16 | 1 | 4096 |
"""


def test_study1_limits_are_multiples_of_its_baseline(tmp_path):
    path = tmp_path / "RESULTS.md"
    path.write_text(STUDY1)
    assert study1_limits(path) == {"ssgd": 4, "adpsgd-fixed": 16, "hadpsgd": None}
    assert study1_limits(tmp_path / "missing.md") == {}


def test_study1_limits_replace_the_papers_batches():
    caps = {"ssgd": 4 * 256, "adpsgd-fixed": 16 * 256}
    rows = {(r["gpus"], r["algo"]): r["batch"]
            for r in project(T_FRAME, MODEL_BYTES, NET, ASSUMPTIONS, caps)}
    assert rows[(16, "ssgd")] == 1024 and rows[(64, "adpsgd-fixed")] == 4096
    assert rows[(64, "hadpsgd")] == ASSUMPTIONS["batch_adpsgd"]


def test_study1_limits_skip_partial_rows_and_the_deciding_points_table(tmp_path):
    path = tmp_path / "RESULTS.md"
    path.write_text(STUDY1.replace("## Study 2", """
| adpsgd-random | 16 | - | 2.0 (lr_ref 0.2) | 256 of [256] tried |

| strategy | B | seeds | mean CE | vs baseline | within 2 % | beyond the spread |
|---|---|---|---|---|---|---|
| ssgd | 256 | 3 | 2.1 | +1.0% | yes | yes |

## Study 2"""))
    # a row tried at one batch gives a bound, not a limit: the papers' limit stays
    assert study1_limits(path) == {"ssgd": 4, "adpsgd-fixed": 16, "hadpsgd": None}


def test_a_partial_row_with_a_larger_batch_tried_gives_its_limit(tmp_path):
    path = tmp_path / "RESULTS.md"
    path.write_text(STUDY1.replace("## Study 2", """
| adpsgd-delay1 | 16 | 2.0 (lr_ref 0.2) | 2.3 (lr_ref 0.4) | 64 of [64, 256, 1024] tried |
| adpsgd-random | 16 | - | 2.0 (lr_ref 0.4) | 1024 of [256, 1024] tried |

## Study 2"""))
    # 64 within 2 % and 256 not: 4x, as a full row's; 1024, the largest tried, is a bound
    limits = study1_limits(path)
    assert limits["adpsgd-delay1"] == 4 and "adpsgd-random" not in limits
