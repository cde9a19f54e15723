"""ssgd: synchronous SGD with DistributedDataParallel.

Every step, DDP's bucketed allreduce (overlapped with backward) averages the learners'
gradients, so all take the same step: N learners with local batch b give the update of one
process with batch N*b. DDP broadcasts learner 0's weights at wrap time, so all start equal.
A failed allreduce (a learner died) ends the job with the lost learner named, through a DDP
communication hook that does the allreduce itself. (No ``from __future__ import annotations``
here: DDP checks the hook's annotations at runtime.)
"""


from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

from asrdist.parallel.base import DistributedStrategy
from asrdist.parallel.health import abort


class SSGD(DistributedStrategy):
    name = "ssgd"

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.steps = 0

    def wrap_model(self, model: torch.nn.Module) -> torch.nn.Module:
        if not self.multi:
            return model
        device_ids = [model_device(model)] if model_device(model) is not None else None
        ddp = DistributedDataParallel(model, device_ids=device_ids)
        ddp.register_comm_hook(HookState(self, None, self.world_size), allreduce_mean_hook)
        self._track_ddp(ddp)
        self._start_distance(model)
        return ddp

    def before_step(self, model: torch.nn.Module, step: int) -> None:
        self._begin_compute()

    def after_backward(self, model: torch.nn.Module, step: int) -> None:
        self._end_compute()

    def after_step(self, model: torch.nn.Module, optimizer: torch.optim.Optimizer,
                   step: int) -> None:
        self.steps += 1

    def state_dict(self) -> dict[str, Any]:
        return {"steps": self.steps}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.steps = int(state.get("steps", 0))


def model_device(model: torch.nn.Module) -> int | None:
    """CUDA device index of the model, or None on CPU."""
    p = next(model.parameters())
    return p.device.index if p.device.type == "cuda" else None


@dataclass
class HookState:
    """What the DDP hook needs: the strategy (to name a lost learner) and the group."""

    strategy: DistributedStrategy
    group: dist.ProcessGroup | None
    size: int


def allreduce_mean_hook(
    state: HookState, bucket: dist.GradBucket
) -> torch.futures.Future[torch.Tensor]:
    """DDP's default allreduce-mean, but a failure names the lost learner and ends the job."""
    buf = bucket.buffer().div_(state.size)
    fut = dist.all_reduce(buf, group=state.group, async_op=True).get_future()

    def done(f: torch.futures.Future[Any]) -> torch.Tensor:
        try:
            return f.value()[0]
        except RuntimeError as exc:
            s = state.strategy
            assert s.liveness is not None
            abort(s.rank, f"{s.liveness.explain(exc)}; ending the job")
            raise

    return fut.then(done)
