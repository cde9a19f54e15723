"""A model's weights as one flat vector, under a DistributedDataParallel wrapper or not: what
the asynchronous exchanges send, the distance monitor compares and the simulator mixes."""

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


def add_flat(model: torch.nn.Module, delta: torch.Tensor) -> None:
    """Add a flat vector (as made by :func:`flat_weights`) into the parameters, in place."""
    offset = 0
    with torch.no_grad():
        for p in unwrap(model).parameters():
            n = p.numel()
            p.add_(delta[offset : offset + n].view_as(p).to(p.device, p.dtype))
            offset += n
