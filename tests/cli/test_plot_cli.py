"""asrdist-plot turns run dirs into one PNG of curves."""

from __future__ import annotations

import json

from click.testing import CliRunner

from asrdist.cli.plot import main


def _run_dir(path, scale):
    path.mkdir()
    records = [{"kind": "start", "rank": 0, "step": 0, "wall_s": 0.0}]
    for step in range(1, 11):
        records.append({"kind": "train", "rank": 0, "step": step, "epoch": 1 + step // 5,
                        "progress": step / 5, "wall_s": step * scale, "loss": 2.0 / step})
        if step % 5 == 0:
            records.append({"kind": "heldout", "rank": 0, "step": step, "progress": step / 5,
                            "wall_s": step * scale, "heldout_ce": 2.5 / step})
    (path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def test_plot_compares_runs_in_one_png(tmp_path):
    a, b = _run_dir(tmp_path / "ssgd", 1.0), _run_dir(tmp_path / "adpsgd", 0.5)
    out = tmp_path / "plots" / "curves.png"
    result = CliRunner().invoke(main, [str(a), str(b), "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and out.stat().st_size > 10_000


def test_plot_refuses_a_dir_without_metrics(tmp_path):
    result = CliRunner().invoke(main, [str(tmp_path), "--out", str(tmp_path / "x.png")])
    assert result.exit_code == 1 and "no metrics.jsonl" in result.output
