"""The learners' mean of a set of tensors, in one allreduce: the final average of every
strategy (the exported model) and RBM pretraining's average at the end of each layer."""

from __future__ import annotations

from collections.abc import Iterable

import torch
import torch.distributed as dist

from asrdist.parallel.rules.weights import unflatten_into


def average_tensors(tensors: Iterable[torch.Tensor], world_size: int,
                    group: dist.ProcessGroup | None = None) -> None:
    """Replace ``tensors``, in place, by their mean over all ``world_size`` learners (the
    default group, or ``group``: a group made outside torch.distributed's registry, such as an
    elastic run's survivors, of that size): summed in one flat allreduce, then divided."""
    tensors = list(tensors)
    with torch.no_grad():
        flat = torch.cat([t.detach().reshape(-1) for t in tensors])
        if group is None:
            dist.all_reduce(flat)
        else:
            group.allreduce([flat]).wait()
        flat /= world_size
    unflatten_into(tensors, flat)
