"""The studies' figures: a row of panels, saved atomically as a PNG beside the studies."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from asrdist.fsutil import atomic_path


def panels(count: int, width: float, height: float, sharey: bool = True) -> tuple[Any, list]:
    """A figure of ``count`` panels side by side (matplotlib without a display)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, count, figsize=(width * count, height), sharey=sharey,
                             squeeze=False)
    return fig, list(axes[0])


def curves(ax: Any, title: str, xlabel: str,
           series: list[tuple[str, list[float], list[float]]], **style: Any) -> list:
    """One panel: a line per ``(label, xs, ys)``; the lines, for marks in their colours."""
    lines = [ax.plot(xs, ys, label=label, **style)[0] for label, xs, ys in series]
    ax.set_title(title, fontsize=9)
    ax.set_xlabel(xlabel)
    ax.grid(alpha=0.3)
    return lines


def save(fig: Any, axes: list, ylabel: str, path: Path) -> None:
    """Label the first panel's y axis, put the legend there, and write ``path``."""
    axes[0].set_ylabel(ylabel)
    axes[0].legend(fontsize=7)
    write_png(fig, path)


def write_png(fig: Any, path: Path) -> None:
    """Lay ``fig`` out and write it as ``path``, complete or not at all."""
    fig.tight_layout()
    with atomic_path(path) as tmp:
        fig.savefig(tmp, dpi=110, format="png")
