"""ssgd: synchronous SGD with DistributedDataParallel.

Every step, DDP's bucketed allreduce (overlapped with backward) averages the learners'
gradients, so all take the same step: N learners with local batch b give the update of one
process with batch N*b. DDP broadcasts learner 0's weights at wrap time, so all start equal.
A failed allreduce (a learner died) ends the job with the lost learner named, through a DDP
communication hook that does the allreduce itself. Nothing is ever in flight between steps, so
``sync`` has nothing to do.
"""

from __future__ import annotations

import torch
from torch.nn.parallel import DistributedDataParallel

from asrdist.parallel.base import DistributedStrategy
from asrdist.parallel.ddp import HookState, allreduce_mean_hook
from asrdist.parallel.options import CommonOptions
from asrdist.parallel.registry import StrategySpec, register
from asrdist.parallel.weights import model_device


class SSGD(DistributedStrategy):
    name = "ssgd"

    def wrap_model(self, model: torch.nn.Module) -> torch.nn.Module:
        if not self.multi:
            return model
        device = model_device(model)
        ddp = DistributedDataParallel(model, device_ids=[device] if device is not None else None)
        ddp.register_comm_hook(HookState(self.liveness, None, self.world_size), allreduce_mean_hook)
        self._track_ddp(ddp)
        self._start_distance(model)
        return ddp

    def before_step(self, model: torch.nn.Module, step: int) -> None:
        self._begin_compute()

    def after_backward(self, model: torch.nn.Module, step: int) -> None:
        self._end_compute()


register(StrategySpec(
    "ssgd", SSGD, CommonOptions,
    "synchronous SGD: gradients allreduced every step (DistributedDataParallel)",
))
