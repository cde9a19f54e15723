"""TensorBoard event files beside metrics.jsonl: what a lab watches its cluster runs in.

Every number of a learner's metrics.jsonl record (:mod:`asrdist.train.metrics`) but its
position is written as the scalar ``KIND/NAME`` at the record's step (``train/loss``,
``train/lr``, ``train/frames_per_s``, ``heldout/heldout_ce``, ``train/sent_bytes``, the
asynchronous strategies' ``train/staleness`` and ``train/dist_to_mean``...), through torch's
``SummaryWriter``. TensorBoard is an optional extra (``pip install asrdist[tensorboard]``):
without it the run says so in one line and writes metrics.jsonl alone.
"""

from __future__ import annotations

import logging
import math
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

POSITION = ("rank", "step", "epoch", "final")  # where the record is, not what it measures


class TensorBoardMirror:
    """Learner ``rank``'s event files in ``logdir`` (learner r > 0: ``logdir/learnerR``, its own
    run in TensorBoard); ``resume_step``: events after it, from the run the checkpoint
    outlived, are dropped, as metrics.jsonl's records are (-1: every earlier event in
    ``logdir``, as a run written again from its start drops them)."""

    def __init__(self, logdir: Path, rank: int, resume_step: int | None) -> None:
        from torch.utils.tensorboard import SummaryWriter  # needs the tensorboard package

        where = logdir if rank == 0 else logdir / f"learner{rank}"
        self._writer = SummaryWriter(  # purged: the events of steps after resume_step
            log_dir=str(where), purge_step=None if resume_step is None else resume_step + 1)

    def write(self, record: dict[str, Any], walltime: float | None = None) -> None:
        """``walltime``: the events' time (seconds since the epoch) where it is not now."""
        step, kind = record.get("step", 0), record["kind"]
        for name, value in record.items():
            if name in POSITION or isinstance(value, bool) or not isinstance(value, int | float):
                continue
            if math.isfinite(value):
                self._writer.add_scalar(f"{kind}/{name}", value, step, walltime=walltime)
        self._writer.flush()

    def close(self) -> None:
        self._writer.close()


def open_mirror(logdir: Path, rank: int, resume_step: int | None) -> TensorBoardMirror | None:
    """The mirror, or None (said once, by learner 0) where the tensorboard package is absent."""
    try:
        return TensorBoardMirror(logdir, rank, resume_step)
    except ImportError:
        if rank == 0:
            log.warning("tensorboard is not installed (pip install 'asrdist[tensorboard]'): "
                        "no event files; metrics.jsonl has every figure")
        return None
