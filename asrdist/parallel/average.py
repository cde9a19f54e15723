"""The learners' mean of a set of tensors, in one allreduce: the final average of every
strategy (the exported model) and RBM pretraining's average at the end of each layer."""

from __future__ import annotations

from collections.abc import Iterable

import torch
import torch.distributed as dist


def average_tensors(tensors: Iterable[torch.Tensor], world_size: int) -> None:
    """Replace ``tensors``, in place, by their mean over all ``world_size`` learners (the
    default group): summed in one flat allreduce, then divided."""
    tensors = list(tensors)
    with torch.no_grad():
        flat = torch.cat([t.detach().reshape(-1) for t in tensors])
        dist.all_reduce(flat)
        flat /= world_size
        offset = 0
        for t in tensors:
            t.copy_(flat[offset : offset + t.numel()].view_as(t))
            offset += t.numel()
