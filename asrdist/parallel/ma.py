"""ma: periodic model averaging (Su & Chen 2015; Kaldi nnet3's parallel training).

Each learner takes ``avg_period`` (K) local steps, then all learners replace their weights by
the average (one allreduce, torch's ``model_averaging.utils.average_parameters``) after step k
when (k + 1) % K == 0. ``avg_frames`` gives the period in training frames per learner instead,
as Kaldi (samples per iteration) and Su & Chen's fork (``--frames-per-avg``, default 10000)
do: a step is ``batch_size x chunk_len`` labelled frames (fewer only in a chunk padded at an
utterance's end), so the period is that many frames rounded to whole steps, the same on every
learner (an allreduce needs all of them at once). Optimizer state (momentum) stays local.
Averaging is keyed on the trainer's step, which a checkpoint holds, so a resumed run averages
at the same steps.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from asrdist.options import NON_NEGATIVE, POSITIVE, Options, option
from asrdist.parallel.base import DistributedStrategy
from asrdist.parallel.options import training_option
from asrdist.parallel.registry import StrategySpec, register
from asrdist.parallel.rules import averaging_due
from asrdist.parallel.strategy import Learner
from asrdist.parallel.weights import unwrap


@dataclass(frozen=True)
class MAOptions(Options):
    avg_period: int = option(8, "ma, bmuf, diloco: local steps between weight averages",
                             check=POSITIVE)
    avg_frames: int = option(0, "ma, bmuf, diloco: training frames per learner between "
                             "weight averages, rounded to whole steps of batch-size x "
                             "chunk-len frames; replaces --avg-period when set "
                             "(0 = use --avg-period)", check=NON_NEGATIVE)
    batch_size: int = training_option(256, "the run's chunks per learner per step")
    chunk_len: int = training_option(21, "the run's labelled frames per chunk")

    def period(self) -> int:
        """Local steps between averages."""
        if self.avg_frames == 0:
            return self.avg_period
        return max(1, round(self.avg_frames / (self.batch_size * self.chunk_len)))


class ModelAveraging(DistributedStrategy):
    name = "ma"

    def __init__(self, learner: Learner, options: MAOptions) -> None:
        super().__init__(learner)
        self.avg_period = options.period()
        self.averages = 0

    def wrap_model(self, model: torch.nn.Module) -> torch.nn.Module:
        self._start_distance(model)
        return model

    def before_step(self, model: torch.nn.Module, step: int) -> None:
        if self.multi:
            self.comm.compute_begins()

    def after_backward(self, model: torch.nn.Module, step: int) -> None:
        if self.multi:
            self.comm.compute_ends()

    def after_step(self, model: torch.nn.Module, step: int) -> None:
        if self.multi and averaging_due(step, self.avg_period):
            self.comm.average_(list(unwrap(model).parameters()))
            self.averages += 1

    def lockstep(self) -> tuple[tuple[int, ...], int]:
        """All learners; none passes the next averaging step without the others."""
        return tuple(range(self.world_size)), self.avg_period

    def metrics(self) -> dict[str, Any]:
        out = super().metrics()
        out["averages"] = self.averages
        out["avg_period"] = self.avg_period
        return out

    def state_dict(self) -> dict[str, Any]:
        return {"averages": self.averages}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.averages = int(state.get("averages", 0))


register(StrategySpec(
    "ma", ModelAveraging, MAOptions,
    "periodic model averaging every K local steps or N frames (Su & Chen; Kaldi nnet3)",
))
