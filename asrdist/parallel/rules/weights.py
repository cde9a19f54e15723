"""A model's weights as one flat vector, under a DistributedDataParallel wrapper or not: what
the distance monitor compares and the simulator mixes (the asynchronous exchanges gather theirs
into vectors made once: :mod:`asrdist.parallel.rules.staging`)."""

from __future__ import annotations

from collections.abc import Iterable

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


def flat_params(model: torch.nn.Module) -> torch.Tensor:
    """The parameters as one fresh flat vector, on their device and in their dtype."""
    return torch.cat([p.detach().reshape(-1) for p in unwrap(model).parameters()])


def unflatten_into(tensors: Iterable[torch.Tensor], flat: torch.Tensor) -> None:
    """Copy consecutive slices of ``flat`` into ``tensors``, in order and in place (their
    storage is kept: DDP's buckets and the optimizer hold views of it)."""
    offset = 0
    with torch.no_grad():
        for t in tensors:
            n = t.numel()
            t.copy_(flat[offset: offset + n].view_as(t))
            offset += n


def load_flat(model: torch.nn.Module, flat: torch.Tensor) -> None:
    """Copy a flat vector (as :func:`flat_params` makes) into the parameters."""
    unflatten_into(unwrap(model).parameters(), flat)


def load_flat_grads(params: list[torch.Tensor], flat: torch.Tensor) -> None:
    """Copy a flat vector into the parameters' gradients, in order."""
    grads = [p.grad for p in params]
    assert all(g is not None for g in grads)
    unflatten_into(grads, flat)  # type: ignore[arg-type]
