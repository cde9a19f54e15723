"""Where a command's network runs: ``--device cpu``, ``cuda`` or ``cuda:N``, checked once."""

from __future__ import annotations

import torch

from asrdist.errors import AsrdistError


def torch_device(name: str, option: str = "--device") -> torch.device:
    """``name`` as a torch device; a CUDA device on a machine without CUDA, or a name torch
    does not know, is a one-line error naming ``option``."""
    try:
        device = torch.device(name)
    except RuntimeError as e:
        raise AsrdistError(f"{option} {name}: not a device (cpu, cuda or cuda:N)") from e
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise AsrdistError(f"{option} {name}: no CUDA device is available")
        if device.index is not None and device.index >= torch.cuda.device_count():
            raise AsrdistError(f"{option} {name}: this machine has "
                               f"{torch.cuda.device_count()} CUDA device(s)")
    elif device.type != "cpu":
        raise AsrdistError(f"{option} {name}: not a device (cpu, cuda or cuda:N)")
    return device
