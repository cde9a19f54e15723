"""ssgd: synchronous SGD with DistributedDataParallel.

Every step, DDP's bucketed allreduce (overlapped with backward) averages the learners'
gradients, so all take the same step (on processes during backward; the simulator at
``after_backward``): N learners with local batch b give the update of one
process with batch N*b. DDP broadcasts learner 0's weights at wrap time, so all start equal.
A failed allreduce (a learner died) ends the job with the lost learner named, through a DDP
communication hook that does the allreduce itself. Nothing is ever in flight between steps, so
``sync`` has nothing to do.
"""

from __future__ import annotations

import torch

from asrdist.parallel.base import DistributedStrategy
from asrdist.parallel.options import NoOptions
from asrdist.parallel.registry import StrategySpec, register


class SSGD(DistributedStrategy):
    name = "ssgd"

    def wrap_model(self, model: torch.nn.Module) -> torch.nn.Module:
        if not self.multi:
            return model
        ddp = self.comm.gradient_mean(model)
        self._start_distance(model)
        return ddp

    def before_step(self, model: torch.nn.Module, step: int) -> None:
        self.comm.compute_begins()

    def after_backward(self, model: torch.nn.Module, step: int) -> None:
        self.comm.compute_ends()
        if self.multi:
            self.comm.gradients_averaged(model)


register(StrategySpec(
    "ssgd", lambda learner, options: SSGD(learner), NoOptions,
    "synchronous SGD: gradients allreduced every step (DistributedDataParallel)",
))
