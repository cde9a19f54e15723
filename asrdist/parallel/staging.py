"""Moving an ADPSGD learner's weights between its device and the exchange thread without
stalling the compute stream.

The exchange thread (:mod:`asrdist.parallel.exchange`) swaps flat float32 CPU tensors over
gloo. On CPU a snapshot is a plain copy and a merged delta is added in place, as before. On a
GPU, done naively, each snapshot is a blocking device-to-host copy per parameter and each merge
a blocking host-to-device copy per parameter: both stall the Python thread that queues the
compute kernels. Here instead:

- snapshot: on a side CUDA stream (ordered after the compute stream's work so far) the
  parameters are gathered into one device vector and copied with ``non_blocking=True`` into a
  pinned host buffer; the compute stream waits only for the on-device gather, not the copy.
  The exchange thread calls the returned ``ready`` (the copy's event) before reading it;
- merge: one non-blocking host-to-device copy of the whole delta (pinned when the exchange
  allocated it so) into a device buffer reused every merge, then one fused add into the
  parameters, both queued on the compute stream: no host synchronisation.

Pinned buffers come from torch's caching host allocator, which keeps a block until the copies
recorded on it are done, so a snapshot still being sent is never overwritten.
"""

from __future__ import annotations

import torch

from asrdist.parallel.rules import Ready
from asrdist.parallel.weights import add_flat, flat_weights, unwrap


class DeviceStaging:
    """Snapshots and merges for one model; a thin pass-through on CPU."""

    def __init__(self, model: torch.nn.Module) -> None:
        params = list(unwrap(model).parameters())
        self.device = params[0].device
        self.numel = sum(p.numel() for p in params)
        self.on_gpu = self.device.type == "cuda"
        self._stream = torch.cuda.Stream(self.device) if self.on_gpu else None
        self._delta: torch.Tensor | None = None  # device buffer for merged deltas

    def host_zeros(self, numel: int) -> torch.Tensor:
        """A float32 host vector for the exchange, pinned when the model is on a GPU."""
        return torch.zeros(numel, pin_memory=self.on_gpu)

    def snapshot(self, model: torch.nn.Module) -> tuple[torch.Tensor, Ready]:
        """A flat float32 host copy of the weights, and what to call before reading it."""
        if not self.on_gpu:
            return flat_weights(model), None
        assert self._stream is not None
        params = [p.detach() for p in unwrap(model).parameters()]
        compute = torch.cuda.current_stream(self.device)
        self._stream.wait_stream(compute)  # the weights as the compute stream leaves them now
        with torch.cuda.stream(self._stream):
            flat = torch.cat([p.reshape(-1).float() for p in params])
            gathered = torch.cuda.Event()
            gathered.record(self._stream)
            host = torch.empty(self.numel, pin_memory=True)
            host.copy_(flat, non_blocking=True)
            copied = torch.cuda.Event()
            copied.record(self._stream)
        compute.wait_event(gathered)  # the next optimizer step may not overwrite mid-gather
        return host, copied.synchronize

    def add(self, model: torch.nn.Module, delta: torch.Tensor) -> None:
        """Add a flat delta (host or device) into the parameters, in place."""
        if not self.on_gpu:
            add_flat(model, delta)
            return
        if delta.device != self.device:
            if self._delta is None:
                self._delta = torch.empty(self.numel, device=self.device)
            self._delta.copy_(delta, non_blocking=True)
            delta = self._delta
        params = list(unwrap(model).parameters())
        views = [v.view_as(p).to(p.dtype)
                 for v, p in zip(delta.split([p.numel() for p in params]), params, strict=True)]
        with torch.no_grad():
            torch._foreach_add_(params, views)
