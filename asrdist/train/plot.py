"""Training curves from run dirs: loss and held-out cross-entropy against wall time and epochs."""

from __future__ import annotations

import os
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only; no display on cluster nodes
import matplotlib.pyplot as plt  # noqa: E402

from asrdist.errors import AsrdistError  # noqa: E402
from asrdist.train.metrics import read_metrics  # noqa: E402

_PANELS = (  # (record kind, y field, x field, title)
    ("train", "loss", "wall_s", "training loss"),
    ("heldout", "heldout_ce", "wall_s", "held-out cross-entropy"),
    ("train", "loss", "progress", "training loss"),
    ("heldout", "heldout_ce", "progress", "held-out cross-entropy"),
)
_X_LABELS = {"wall_s": "wall time (s)", "progress": "epochs"}


def _curves(run: Path) -> list[tuple[str, list[dict]]]:
    """(label, records) per learner's metrics file of one run dir."""
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
    """Write one PNG of four panels comparing ``runs``; return its path."""
    fig, axes = plt.subplots(2, 2, figsize=(11, 8))
    for run in runs:
        for label, records in _curves(Path(run)):
            if rank0_only and " rank" in label:
                continue
            for ax, (kind, y, x, title) in zip(axes.flat, _PANELS, strict=True):
                points = [(r[x], r[y]) for r in records if r.get("kind") == kind and y in r]
                if points:
                    xs, ys = zip(*points, strict=True)
                    ax.plot(xs, ys, label=label, marker="o" if kind == "heldout" else None,
                            markersize=3)
                ax.set_title(title)
                ax.set_xlabel(_X_LABELS[x])
                ax.grid(alpha=0.3)
    for ax in axes.flat:
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=8)
    fig.tight_layout()
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=100)
    plt.close(fig)
    return out
