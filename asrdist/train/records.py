"""A learner's metrics.jsonl records (:mod:`asrdist.train.metrics`), each starting with where
the run is (:class:`~asrdist.train.position.Position`), and the stop at a non-finite loss.

The loss is read from the device only here, once per train record: the interval's sums stay
on the device in between, and its first non-finite loss is named with its step.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from asrdist.errors import AsrdistError
from asrdist.train.checkpoint import list_checkpoints
from asrdist.train.metrics import MetricsWriter
from asrdist.train.position import Position
from asrdist.train.tensorboard import open_mirror


class Records:
    """The records of learner ``rank`` in ``out`` (``resumed``: records newer than the
    position's step, written after the checkpoint resumed, are dropped); ``tensorboard``: the
    event files' directory as well, or None."""

    def __init__(self, out: Path, rank: int, pos: Position, resumed: bool,
                 tensorboard: Path | None = None) -> None:
        self.out, self.rank, self.pos = out, rank, pos
        resume_step = pos.step if resumed else None
        mirror = None if tensorboard is None else open_mirror(tensorboard, rank, resume_step)
        self.writer = MetricsWriter(out, rank, resume_step, mirror)

    def start(self, **fields: Any) -> None:
        self.writer.write("start", step=self.pos.step, wall_s=self.pos.wall(), **fields)

    def train(self, lr: float, seconds: float, scaler: torch.amp.GradScaler | None,
              **extra: Any) -> tuple[float, float]:
        """A train record of the interval (``seconds`` long; fp16: the gradient scaler's
        scale, a read from the device), then a new interval; returns its loss per frame and
        frames per second."""
        self.check_loss()
        iv = self.pos.interval
        loss, fps = iv.mean_loss(), iv.frames / max(seconds, 1e-9)
        scale = {} if scaler is None else {"loss_scale": scaler.get_scale()}
        self.writer.write("train", **self.pos.where(), loss=loss, lr=lr, steps=iv.steps,
                          frames_per_s=fps, data_wait_s=iv.data_wait_s,
                          compute_s=iv.compute_s, **scale, **extra)
        self.pos.new_interval()
        return loss, fps

    def heldout(self, frames: int, figures: dict[str, float], final: bool, epochs: int,
                **extra: Any) -> None:
        """A heldout record; ``final``: of the exported average, after the last of ``epochs``
        (epoch N, progress N) or where a --max-steps stopped it."""
        pos, ended = self.pos, self.pos.epoch >= epochs  # ended: only the final one
        self.writer.write("heldout", step=pos.step, epoch=min(pos.epoch + 1, epochs),
                          **({"final": True} if final else {}),
                          progress=float(pos.epoch) if ended else pos.progress(),
                          wall_s=pos.wall(), frames=pos.frames, heldout_frames=frames,
                          **figures, **extra)

    def noise(self, seconds: float, found: dict[str, Any]) -> None:
        """A noise record: the gradient noise scale measured in ``seconds``."""
        self.writer.write("noise", **self.pos.where(), measure_s=seconds, **found)

    def check_loss(self) -> None:
        """Stop at a non-finite loss since the last record, naming its step (at the latest at
        the next record, checkpoint or end of epoch, so no checkpoint holds its weights)."""
        bad = self.pos.interval.non_finite()
        if bad is None:
            return
        steps = list_checkpoints(self.out, self.rank)
        kept = f"last good checkpoint: {steps[max(steps)]}" if steps else "no checkpoint yet"
        raise AsrdistError(
            f"loss is {bad[1]} at step {bad[0] + 1} (epoch {self.pos.epoch + 1}); training "
            f"stopped, {kept}; lower --lr or set --grad-clip"
        )

    def close(self) -> None:
        self.writer.close()
