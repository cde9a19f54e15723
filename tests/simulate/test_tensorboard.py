"""A simulated run's records as event files: each figure at the learners' mean step rounded,
the simulated clock as wall time; a run written again replaces the earlier events."""

from __future__ import annotations

import logging
import sys

import pytest

from asrdist.simulate.tensorboard import write_records

event_accumulator = pytest.importorskip(
    "tensorboard.backend.event_processing.event_accumulator",
    reason="the tensorboard extra is not installed")


def _events(logdir) -> dict[str, list[tuple[int, float, float]]]:
    acc = event_accumulator.EventAccumulator(str(logdir))
    acc.Reload()
    return {tag: [(e.step, e.wall_time, e.value) for e in acc.Scalars(tag)]
            for tag in acc.Tags()["scalars"]}


RECORDS = [
    {"time_s": 0.0, "steps": 0.0, "dist_to_mean": 0.0, "epochs": 0.0, "heldout_ce": 4.5,
     "heldout_acc": 0.1},
    {"time_s": 12.5, "steps": 10.4, "dist_to_mean": 0.25, "epochs": 0.5, "heldout_ce": 3.0,
     "heldout_acc": 0.3},
    {"time_s": 30.0, "steps": 20.6, "dist_to_mean": 0.0, "epochs": 1.0, "heldout_ce": 2.5,
     "heldout_acc": 0.4, "final": True},
]


def test_every_record_is_a_heldout_scalar_at_its_step_and_simulated_time(tmp_path):
    assert write_records(tmp_path / "tb", RECORDS)
    events = _events(tmp_path / "tb")
    assert sorted(events) == ["heldout/dist_to_mean", "heldout/epochs", "heldout/heldout_acc",
                              "heldout/heldout_ce", "heldout/time_s"]  # no steps, no final
    assert events["heldout/heldout_ce"] == [(0, 0.0, 4.5), (10, 12.5, 3.0), (21, 30.0, 2.5)]
    assert [v for _, _, v in events["heldout/dist_to_mean"]] == [0.0, 0.25, 0.0]


def test_a_run_written_again_replaces_the_earlier_events(tmp_path):
    assert write_records(tmp_path / "tb", RECORDS)
    shorter = [{**RECORDS[0], "heldout_ce": 9.0}, {**RECORDS[1], "heldout_ce": 8.0}]
    assert write_records(tmp_path / "tb", shorter)
    assert _events(tmp_path / "tb")["heldout/heldout_ce"] == [(0, 0.0, 9.0), (10, 12.5, 8.0)]


def test_a_non_finite_figure_is_left_out(tmp_path):
    assert write_records(tmp_path / "tb", [{**RECORDS[0], "heldout_ce": float("nan")}])
    events = _events(tmp_path / "tb")
    assert "heldout/heldout_ce" not in events and events["heldout/heldout_acc"]


def test_without_the_package_nothing_is_written_and_it_says_so(tmp_path, monkeypatch, caplog):
    monkeypatch.setitem(sys.modules, "torch.utils.tensorboard", None)  # import fails
    with caplog.at_level(logging.WARNING):
        assert not write_records(tmp_path / "tb", RECORDS)
    assert "tensorboard is not installed" in caplog.text
    assert not (tmp_path / "tb").exists()
