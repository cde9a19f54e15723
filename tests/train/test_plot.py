"""plot_runs: the B_simple panels appear only when a run measured the noise scale; a
simulator's report is drawn beside run dirs."""

from __future__ import annotations

import json

import matplotlib.image
import pytest

from asrdist.errors import AsrdistError
from asrdist.train.plot import _curves, plot_runs


def _run_dir(path, noise: bool):
    path.mkdir()
    records = []
    for step in range(1, 11):
        records.append({"kind": "train", "rank": 0, "step": step, "progress": step / 5,
                        "wall_s": float(step), "loss": 2.0 / step})
        if noise and step % 2 == 0:  # one without a B_simple yet (|G|^2 not positive)
            records.append({"kind": "noise", "rank": 0, "step": step, "progress": step / 5,
                            "wall_s": float(step), "b_simple": None if step == 2 else 10.0 * step})
    (path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def test_noise_records_add_a_column_of_panels(tmp_path):
    plain = plot_runs([_run_dir(tmp_path / "plain", False)], tmp_path / "plain.png")
    both = plot_runs([tmp_path / "plain", _run_dir(tmp_path / "noise", True)],
                     tmp_path / "both.png")
    assert matplotlib.image.imread(plain).shape[:2] == (800, 1100)
    assert matplotlib.image.imread(both).shape[:2] == (800, 1600)


def _report(path, noise: bool):
    """An asrdist-simulate report: a step-0 record, then evaluations, the last one final."""
    records = [{"time_s": 2.0 * k, "steps": 4.0 * k, "epochs": k / 2, "dist_to_mean": 0.1,
                "heldout_ce": 3.0 - k / 4, "heldout_acc": 0.1 * k} for k in range(5)]
    records[-1]["final"] = True
    report = {"version": "0", "records": records, "summary": {"time_s": 8.0}}
    if noise:
        report["noise_scale"] = [{"time_s": 4.0, "steps": 8.0, "epochs": 1.0, "b_simple": 40.0}]
    path.write_text(json.dumps(report))
    return path


def test_a_simulator_report_is_drawn_as_a_run(tmp_path):
    report = _report(tmp_path / "adpsgd.json", noise=True)
    (label, records), = _curves(report)
    assert label == "adpsgd (simulated)"
    held = [(r["wall_s"], r["progress"], r["heldout_ce"]) for r in records
            if r["kind"] == "heldout"]
    assert held[0] == (0.0, 0.0, 3.0) and held[-1] == (8.0, 2.0, 2.0)
    assert [r["b_simple"] for r in records if r["kind"] == "noise"] == [40.0]
    png = plot_runs([_run_dir(tmp_path / "real", False), report], tmp_path / "both.png")
    assert matplotlib.image.imread(png).shape[:2] == (800, 1600)  # with the noise column


def test_a_file_that_is_not_a_report_is_refused(tmp_path):
    for name, text in (("x.json", "[1, 2]"), ("y.json", "not json"), ("z.json", "{}")):
        (tmp_path / name).write_text(text)
        with pytest.raises(AsrdistError, match="not an asrdist-simulate report"):
            plot_runs([tmp_path / name], tmp_path / "x.png")
