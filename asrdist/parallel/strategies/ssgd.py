"""ssgd: synchronous SGD with DistributedDataParallel.

Every step, DDP's bucketed allreduce (overlapped with backward) averages the learners'
gradients, so all take the same step (on processes during backward; the simulator at
``after_backward``): N learners with local batch b give the update of one
process with batch N*b. DDP broadcasts learner 0's weights at wrap time, so all start equal.
A failed allreduce (a learner died) ends the job with the lost learner named, through a DDP
communication hook that does the allreduce itself. Nothing is ever in flight between steps, so
``sync`` has nothing to do.

``--compress`` encodes the gradient mean (the strategy's
:meth:`~asrdist.parallel.rules.compression.Compression.gradient`, which the transport makes):
torch's bf16/fp16 and PowerSGD hooks, or asrdist's own codecs with error feedback after
backward; its state (residuals, PowerSGD's) is in the checkpoints.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch

from asrdist.parallel.base import DistributedStrategy
from asrdist.parallel.options import CompressOptions
from asrdist.parallel.registry import StrategySpec, register
from asrdist.parallel.strategy import Learner


@dataclass(frozen=True)
class SSGDOptions(CompressOptions):
    powersgd_ok: ClassVar[bool] = True


class SSGD(DistributedStrategy):
    name = "ssgd"

    def __init__(self, learner: Learner, options: SSGDOptions | None = None) -> None:
        super().__init__(learner, options or SSGDOptions())

    def wrap_model(self, model: torch.nn.Module) -> torch.nn.Module:
        if not self.multi:
            return model
        ddp = self.comm.gradient_mean(
            model, compression=self.compression.gradient(self.comm.gradient_compression))
        self._start_distance(model)
        return ddp

    def before_step(self, model: torch.nn.Module, step: int) -> None:
        self.comm.compute_begins()

    def after_backward(self, model: torch.nn.Module, step: int) -> None:
        self.comm.compute_ends()
        if self.multi:
            self.comm.gradients_averaged(model)


register(StrategySpec(
    "ssgd", SSGD, SSGDOptions,
    "synchronous SGD: gradients allreduced every step (DistributedDataParallel)",
))
