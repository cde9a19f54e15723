"""A model's weights as one flat vector, under a DistributedDataParallel wrapper or not: what
the distance monitor compares and the simulator mixes (the asynchronous exchanges gather theirs
into vectors made once: :mod:`asrdist.parallel.staging`)."""

from __future__ import annotations

import torch


def unwrap(model: torch.nn.Module) -> torch.nn.Module:
    """The plain module under a DistributedDataParallel wrapper."""
    return model.module if isinstance(model, torch.nn.parallel.DistributedDataParallel) else model


def model_device(model: torch.nn.Module) -> int | None:
    """CUDA device index of the model, or None on CPU."""
    p = next(model.parameters())
    return p.device.index if p.device.type == "cuda" else None


def flat_weights(model: torch.nn.Module) -> torch.Tensor:
    """A fresh flat float32 CPU copy of the model's parameters."""
    return torch.cat([p.detach().reshape(-1).float().cpu() for p in unwrap(model).parameters()])

