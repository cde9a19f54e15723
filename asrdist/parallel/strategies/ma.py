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

from asrdist.options import NON_NEGATIVE, POSITIVE, option
from asrdist.parallel.base import DistributedStrategy
from asrdist.parallel.options import CompressOptions, training_option
from asrdist.parallel.registry import StrategySpec, register
from asrdist.parallel.rules.update import averaging_due
from asrdist.parallel.rules.weights import flat_params, load_flat, unwrap
from asrdist.parallel.strategy import Learner


@dataclass(frozen=True)
class MAOptions(CompressOptions):
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

    def synchronous_steps(self) -> int:
        """The first steps after each of which the weights are averaged (post-local SGD's
        synchronous start; bmuf and diloco have none)."""
        return 0


@dataclass(frozen=True)
class PostLocalOptions(MAOptions):
    """ma's own: bmuf and diloco (MAOptions) take no synchronous start."""

    post_local_after: int = option(0, "ma: average the weights after each of the first STEPS "
                                   "steps, then every --avg-period: post-local SGD (Lin et al. "
                                   "2020), synchronous SGD first and local SGD after "
                                   "(0 = off)", check=NON_NEGATIVE)

    def synchronous_steps(self) -> int:
        return self.post_local_after


class ModelAveraging(DistributedStrategy):
    name = "ma"

    def __init__(self, learner: Learner, options: MAOptions) -> None:
        super().__init__(learner, options)
        self.avg_period = options.period()
        # post-local SGD (ma alone): averaging the weights after every step is synchronous
        # SGD (the learners' momentum buffers average as ssgd's one buffer would)
        self.post_local_after = options.synchronous_steps()
        self.averages = 0

    def wrap_model(self, model: torch.nn.Module) -> torch.nn.Module:
        if self.compression.active and self.compression.reference is None:
            # --compress: the blocks' updates are taken from a reference, the same on every
            # learner; the first block's is the learners' mean of the starting weights (one
            # float32 average, as DDP's broadcast at wrap time), so the updates add up to the
            # mean of the weights even where the learners start apart
            start = flat_params(model)
            self.average([start])
            self.compression.reference = start
        self._start_distance(model)
        return model

    def after_step(self, model: torch.nn.Module, step: int) -> None:
        if self.multi and (step < self.post_local_after
                           or averaging_due(step, self.avg_period)):
            if self.compression.active:
                self._compressed_average(model)
            else:
                self.comm.average_(list(unwrap(model).parameters()))
            self.averages += 1

    def _compressed_average(self, model: torch.nn.Module) -> None:
        """The learners' mean as the reference plus the mean of their block updates
        (w - reference), sent compressed with error feedback (raw weights would lose
        everything to a lossy codec); the mean is the next block's reference."""
        mean = self.compression.mean("model")
        reference = self.compression.reference
        assert mean is not None and reference is not None
        with torch.no_grad():
            weights = flat_params(model)
            reference = reference.to(weights.device)
            update = (weights - reference).float()
            self.comm.compressed_mean_(update, mean)
            averaged = reference + update.to(reference.dtype)
            load_flat(model, averaged)
            self.compression.reference = averaged

    def lockstep(self) -> tuple[tuple[int, ...], int]:
        """All learners; none passes the next averaging step without the others."""
        return tuple(range(self.world_size)), self.avg_period

    def metrics(self) -> dict[str, Any]:
        out = super().metrics()
        out["averages"] = self.averages
        out["avg_period"] = self.avg_period
        return out

    def state_dict(self) -> dict[str, Any]:
        return {**super().state_dict(), "averages": self.averages}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        self.averages = int(state.get("averages", 0))


register(StrategySpec(
    "ma", ModelAveraging, PostLocalOptions,
    "periodic model averaging every K local steps or N frames (Su & Chen; Kaldi nnet3); "
    "post-local SGD with --post-local-after",
))
