"""Training curves from run dirs: loss and held-out cross-entropy against wall time and epochs,
and the gradient noise scale B_simple when a run measured it (--noise-scale-every).

An asrdist-simulate report (its JSON) is a run too: its held-out records (against simulated
time) and noise records are drawn as a run dir's, so simulated and real runs compare in one
figure; it has no training loss.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # files only; no display on cluster nodes
import matplotlib.pyplot as plt  # noqa: E402

from asrdist.errors import AsrdistError  # noqa: E402
from asrdist.fsutil import atomic_path  # noqa: E402
from asrdist.train.metrics import read_metrics  # noqa: E402

_PANELS = (  # (record kind, y field, x field, title)
    ("train", "loss", "wall_s", "training loss"),
    ("heldout", "heldout_ce", "wall_s", "held-out cross-entropy"),
    ("train", "loss", "progress", "training loss"),
    ("heldout", "heldout_ce", "progress", "held-out cross-entropy"),
)
_NOISE_PANELS = (  # a third column, when some run has noise records
    ("noise", "b_simple", "wall_s", "noise scale B_simple (chunks)"),
    ("noise", "b_simple", "progress", "noise scale B_simple (chunks)"),
)
_X_LABELS = {"wall_s": "wall time (s)", "progress": "epochs"}


def _simulated(report: Path) -> list[tuple[str, list[dict]]]:
    """(label, records) of an asrdist-simulate report, its records as a run dir's."""
    try:
        found: Any = json.loads(report.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise AsrdistError(f"{report}: not an asrdist-simulate report ({e})") from None
    if not isinstance(found, dict) or not isinstance(found.get("records"), list):
        raise AsrdistError(f"{report}: not an asrdist-simulate report (no records)")
    records = [{"kind": "heldout", "wall_s": r["time_s"], "progress": r.get("epochs"),
                "heldout_ce": r.get("heldout_ce")} for r in found["records"]]
    records += [{"kind": "noise", "wall_s": r["time_s"], "progress": r.get("epochs"),
                 "b_simple": r.get("b_simple")} for r in found.get("noise_scale", [])]
    return [(f"{report.stem} (simulated)", records)]


def _curves(run: Path) -> list[tuple[str, list[dict]]]:
    """(label, records) per learner's metrics file of one run dir, or of a simulator's
    report."""
    if run.is_file():
        return _simulated(run)
    files = sorted(run.glob("metrics*.jsonl"))
    if not files:
        raise AsrdistError(f"{run}: no metrics.jsonl (not a run dir?)")
    out = []
    for path in files:
        suffix = path.name[len("metrics"):-len(".jsonl")]  # "" or ".rank3"
        out.append((run.name + suffix.replace(".", " "), read_metrics(path)))
    return out


def plot_runs(
    runs: list[str | os.PathLike], out: str | os.PathLike, rank0_only: bool = True
) -> Path:
    """Write one PNG of four panels comparing ``runs`` (six with noise records); return its
    path."""
    curves = [(label, records) for run in runs for label, records in _curves(Path(run))
              if not (rank0_only and " rank" in label)]
    noise = any(r.get("kind") == "noise" for _, records in curves for r in records)
    panels = _PANELS
    if noise:  # row by row: the x axis is wall time in the first row, epochs in the second
        panels = (*_PANELS[:2], _NOISE_PANELS[0], *_PANELS[2:], _NOISE_PANELS[1])
    fig, axes = plt.subplots(2, 3 if noise else 2, figsize=(16 if noise else 11, 8))
    for label, records in curves:
        for ax, (kind, y, x, title) in zip(axes.flat, panels, strict=True):
            points = [(r[x], r[y]) for r in records if r.get("kind") == kind
                      and r.get(y) is not None and r.get(x) is not None]
            if points:
                xs, ys = zip(*points, strict=True)
                ax.plot(xs, ys, label=label, marker="o" if kind == "heldout" else None,
                        markersize=3)
            ax.set_title(title)
            if kind == "noise":
                ax.set_yscale("log")
            ax.set_xlabel(_X_LABELS[x])
            ax.grid(alpha=0.3)
    for ax in axes.flat:
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=8)
    fig.tight_layout()
    out = Path(out)
    with atomic_path(out) as tmp:  # a link at out is replaced, never written through
        fig.savefig(tmp, dpi=100, format=out.suffix[1:] or "png")
    plt.close(fig)
    return out
