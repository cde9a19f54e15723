"""Where a learner's run is: its step, epoch and frames, its wall clock over every session of
the run, and the sums since the last metrics record (:class:`~asrdist.train.interval.Interval`).

Every metrics record starts with where it was written (:meth:`Position.where`) and every
checkpoint holds the position (:meth:`Position.state_dict`), so a resumed run counts on as the
uninterrupted one would.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import torch

from asrdist.train.interval import Interval

log = logging.getLogger(__name__)


class Position:
    """The counters of a run whose epochs take ``steps_per_epoch`` steps (a --resume that
    changes --batch-size may change the current epoch's)."""

    def __init__(self, steps_per_epoch: list[int], device: torch.device) -> None:
        self.steps_per_epoch, self.device = steps_per_epoch, device
        self.step = self.epoch = self.step_in_epoch = self.frames = 0
        self.wall_before = 0.0  # wall seconds of earlier sessions of this run
        self.interval = Interval.start(device)  # sums since the last metrics record
        self.start_clock()

    def start_clock(self) -> None:
        """This session's wall clock starts now."""
        self.t0 = time.monotonic()

    def wall(self) -> float:
        return self.wall_before + time.monotonic() - self.t0

    def progress(self) -> float:
        """Epochs done, fractional: the x axis of asrdist-plot's epoch panels."""
        return self.epoch + self.step_in_epoch / self.steps_per_epoch[self.epoch]

    def where(self) -> dict[str, Any]:
        """The fields every train, held-out and noise record starts with."""
        return {"step": self.step, "epoch": self.epoch + 1, "progress": self.progress(),
                "wall_s": self.wall(), "frames": self.frames}

    def steps_left(self) -> int:
        return self.steps_per_epoch[self.epoch] - self.step_in_epoch

    def stepped(self, frames: int) -> None:
        self.step += 1
        self.step_in_epoch += 1
        self.frames += frames

    def next_epoch(self) -> None:
        self.epoch += 1
        self.step_in_epoch = 0

    def rebatch(self, queued: int, chunks: int, old_batch: int, new_batch: int) -> None:
        """--resume-allow batch_size mid-epoch: the epoch goes on from the same data position
        (chunks consumed, not steps counted), so its steps are those done, the ``queued``
        batches made at the old size, and as many new-size batches as the ``chunks`` of the
        smallest shard left fill (every learner computes the same)."""
        done = self.step_in_epoch + queued
        steps = done + (chunks - done * old_batch) // new_batch
        log.info("--resume: --batch-size %d -> %d at step %d of epoch %d: %d steps in it "
                 "instead of %d", old_batch, new_batch, self.step_in_epoch, self.epoch + 1,
                 steps, self.steps_per_epoch[self.epoch])
        self.steps_per_epoch[self.epoch] = steps

    def new_interval(self) -> None:
        self.interval = Interval.start(self.device)

    def state_dict(self) -> dict[str, Any]:
        return {"step": self.step, "epoch": self.epoch, "step_in_epoch": self.step_in_epoch,
                "frames": self.frames, "wall_s": self.wall(),
                "interval": self.interval.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.step, self.epoch = state["step"], state["epoch"]
        self.step_in_epoch, self.frames = state["step_in_epoch"], state["frames"]
        self.wall_before = state["wall_s"]
        self.interval = Interval.from_state(state["interval"], self.device)
