"""The comparison's curves: held-out CE against steps and against simulated time, a panel per
scenario, a line per strategy (the mean over seeds of each evaluation; each seed faint). A run
that a lost learner ended (``failed``) stops where it failed, its strategy labelled so."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # files only
import matplotlib.pyplot as plt  # noqa: E402

from asrdist.fsutil import atomic_path  # noqa: E402

_AXES = (("steps", "steps per learner"), ("time_s", "simulated time (s)"))


def plot_curves(reports: Sequence[dict[str, Any]], out: str | os.PathLike) -> Path:
    """Write the PNG of ``reports`` (runs of a comparison) to ``out``."""
    scenarios = list(dict.fromkeys(r["scenario"] for r in reports))
    strategies = list(dict.fromkeys(r["strategy"] for r in reports))
    colors = {s: f"C{i % 10}" for i, s in enumerate(strategies)}
    fig, axes = plt.subplots(2, len(scenarios), figsize=(5.5 * len(scenarios), 8),
                             squeeze=False, sharey=True)
    for col, scenario in enumerate(scenarios):
        for strategy in strategies:
            chosen = [r for r in reports
                      if (r["scenario"], r["strategy"]) == (scenario, strategy)]
            if not chosen:
                continue
            runs = [r["records"] for r in chosen]
            failed = sum(r.get("failed") is not None for r in chosen)
            label = f"{strategy} ({failed} failed)" if failed else strategy
            for row, (x, label) in enumerate(_AXES):
                ax = axes[row][col]
                for records in runs:
                    ax.plot([r[x] for r in records], [r["heldout_ce"] for r in records],
                            color=colors[strategy], alpha=0.25, linewidth=0.8)
                n = min(len(records) for records in runs)
                mean = [sum(records[i][key] for records in runs) / len(runs)
                        for i in range(n) for key in (x, "heldout_ce")]
                ax.plot(mean[0::2], mean[1::2], color=colors[strategy], marker="o",
                        markersize=3, label=label)
                ax.set_xlabel(label)
                ax.set_title(f"scenario: {scenario}")
                ax.grid(alpha=0.3)
        axes[0][col].legend(fontsize=8)
    for row in axes:
        row[0].set_ylabel("held-out CE")
    fig.tight_layout()
    out = Path(out)
    with atomic_path(out) as tmp:
        fig.savefig(tmp, dpi=100, format="png")
    plt.close(fig)
    return out
