"""metrics.jsonl: one JSON record per line, flushed as written, per learner.

Rank 0 writes ``metrics.jsonl``, rank r > 0 ``metrics.rank{r}.jsonl`` (an elastic run that
lost learner 0: metrics.jsonl ends there, and the held-out figures of the exported average are
in the exporting survivor's file); every record has
``kind`` ("start", "train", "heldout", and "noise" with --noise-scale-every: the gradient
noise scale, asrdist.train.noise_scale), ``rank``, ``step`` and ``wall_s``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from asrdist.fsutil import atomic_write, open_output


def metrics_path(out: str | os.PathLike, rank: int) -> Path:
    return Path(out) / ("metrics.jsonl" if rank == 0 else f"metrics.rank{rank}.jsonl")


def read_metrics(path: str | os.PathLike) -> list[dict[str, Any]]:
    """All complete records of a metrics file (a torn last line is skipped)."""
    records = []
    with open(path) as f:
        for line in f:
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError:
                continue
    return records


class MetricsWriter:
    """Appends records; on resume first drops records newer than the checkpoint's step.
    ``mirror``: also given every record (TensorBoard's event files)."""

    def __init__(self, out: str | os.PathLike, rank: int, resume_step: int | None,
                 mirror: Any = None) -> None:
        self.path = metrics_path(out, rank)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.rank = rank
        if resume_step is not None and self.path.exists():
            kept = [r for r in read_metrics(self.path) if r.get("step", 0) <= resume_step]
            with atomic_write(self.path) as f:
                f.writelines(json.dumps(r) + "\n" for r in kept)
        elif resume_step is None:
            self.path.unlink(missing_ok=True)
        self._file = open_output(self.path, "a")
        self.mirror = mirror

    def write(self, kind: str, **fields: Any) -> None:
        record = {"kind": kind, "rank": self.rank, **fields}
        self._file.write(json.dumps(record) + "\n")
        self._file.flush()
        if self.mirror is not None:
            self.mirror.write(record)

    def close(self) -> None:
        self._file.close()
        if self.mirror is not None:
            self.mirror.close()
