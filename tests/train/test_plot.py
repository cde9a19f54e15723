"""plot_runs: the B_simple panels appear only when a run measured the noise scale."""

from __future__ import annotations

import json

import matplotlib.image

from asrdist.train.plot import plot_runs


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
