"""DistributedDataParallel as ssgd and hadpsgd use it: an allreduce hook that names a lost
learner, and the reducer's release before the process groups go.

(No ``from __future__ import annotations`` here: DDP checks the communication hook's
annotations at runtime.)
"""

from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist

from asrdist.parallel.health import Liveness


def release_reducer(ddp: torch.nn.parallel.DistributedDataParallel) -> None:
    """Destroy DDP's reducer now, while the process groups are still registered.

    The reducer owns a C++ reference to its group and is destroyed with the GIL held. Left to
    die with the wrapper after ``destroy_process_group``, it is the group's last owner, so the
    group's destructor joins the gloo worker threads under the GIL; a worker still freeing a
    finished collective whose tensor Python has already dropped needs the GIL to free it: the
    learner hangs at exit. Destroyed here, it is not the last owner, and
    ``destroy_process_group`` frees the group through its Python binding, which releases the
    GIL first. The wrapper cannot train afterwards.
    """
    for name in ("logger", "reducer"):  # DDP's logger holds the reducer too
        if name in ddp.__dict__:
            delattr(ddp, name)


@dataclass
class HookState:
    """What :func:`allreduce_mean_hook` needs: the learner's liveness (to name a lost learner),
    the group and its size."""

    liveness: Liveness
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
            state.liveness.end_job(exc)
            raise

    return fut.then(done)
