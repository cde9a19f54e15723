"""Moving an ADPSGD learner's weights between its device and the exchange thread without
stalling the compute stream, in vectors made once.

The exchange thread (:mod:`asrdist.parallel.processes.exchange`) swaps flat float32 vectors over
gloo, which reads and writes host memory only. For the paper-size BLSTM (43 M weights, 172 MB) a
fresh host vector costs a page fault per 4 KiB and a host pass over it tens of milliseconds of
one core: more than a GPU step. So:

- every vector is made once and reused. A learner's snapshots alternate between two vectors on
  its device (a double buffer: a passive exchange may still serve the one published before
  while the next is gathered); an exchange has one pinned host pair to send from and receive
  into (:class:`Link`); a passive book two pending vectors (one accumulating, one being
  merged, :class:`~asrdist.parallel.rules.update.PassiveBook`);
- on a GPU the arithmetic of an exchange (the half difference, the passive side's pending sum,
  served + pending) runs on the device, on the *math* stream of the device's :class:`Lane`,
  and the two copies across PCIe on its *copy* stream. Events order them against the compute
  stream, which never waits for a copy, and the compute thread never waits for the device;
  only the exchange thread blocks, on its own copies (blocking-sync events: it sleeps instead
  of spinning a core);
- on CPU the lane's streams are no-ops and the device vectors are the host vectors gloo reads:
  the same code runs, with no copies.

The orderings that keep a reused vector from being overwritten while it is read:

- the compute thread's work on the math stream (a snapshot's gather, a passive book's take)
  first waits for the compute stream's work so far, so it comes after the merge that read the
  vector it overwrites; the compute stream waits for a gather before the optimizer step writes
  the weights (:meth:`DeviceStaging.before_update`) and for a delta's event before adding it;
- the exchange thread queues its math after its host-side waits for the copies it depends on,
  so the math stream never waits on a transfer, and a copy stream copy waits for the event of
  the math that made what it reads (the snapshot's gather through ``ready``);
- the math stream is shared by both threads: its work runs in the order the threads queued it,
  which the exchange's lock makes the order of the book's operations.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from functools import partial

import torch

from asrdist.parallel.rules.update import Ready
from asrdist.parallel.rules.weights import unwrap

Event = torch.cuda.Event | None  # None on CPU: work there is done when its call returns


class Lane:
    """A device's two side streams, shared by the process's staging and exchanges (one per
    device: ordering between them is then the streams' own); on CPU no streams at all."""

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self.cuda = device.type == "cuda"
        self._math = torch.cuda.Stream(device) if self.cuda else None
        self._copy = torch.cuda.Stream(device) if self.cuda else None

    @contextmanager
    def math(self, after_caller: bool = False) -> Iterator[None]:
        """Queue the block's kernels on the math stream; ``after_caller`` (the compute
        thread's calls): after everything the caller's current stream has queued so far."""
        if self._math is None:
            yield
            return
        if after_caller:
            self._math.wait_stream(torch.cuda.current_stream(self.device))
        with torch.cuda.stream(self._math):
            yield

    @contextmanager
    def copies(self) -> Iterator[None]:
        """Queue the block's copies on the copy stream."""
        if self._copy is None:
            yield
            return
        with torch.cuda.stream(self._copy):
            yield

    def mark(self, blocking: bool = False) -> Event:
        """An event after the work queued so far on the current stream (``blocking``: one a
        host thread will wait for, sleeping)."""
        if not self.cuda:
            return None
        event = torch.cuda.Event(blocking=blocking)
        event.record(torch.cuda.current_stream(self.device))
        return event

    def wait(self, event: Event) -> None:
        """Make the current stream wait for ``event`` (no host wait)."""
        if event is not None:
            torch.cuda.current_stream(self.device).wait_event(event)

    def zeros(self, numel: int) -> torch.Tensor:
        """A float32 vector of zeros on the device, for either thread's streams: they wait for
        its fill, and it is not freed while they still use it."""
        buf = torch.zeros(numel, device=self.device)
        for stream in (self._math, self._copy):
            if stream is not None:
                stream.wait_stream(torch.cuda.current_stream(self.device))
                buf.record_stream(stream)
        return buf


_LANES: dict[torch.device, Lane] = {}


def lane(device: torch.device) -> Lane:
    """The process's lane of ``device`` ("cuda" and "cuda:0" are one device, one lane)."""
    if device.type == "cuda" and device.index is None:
        device = torch.device("cuda", torch.cuda.current_device())
    if device not in _LANES:
        _LANES[device] = Lane(device)
    return _LANES[device]


class Link:
    """An exchange's way to gloo: on a GPU a pinned host pair to send from and receive into,
    made once, and the copies to and from the device (on the copy stream, waited for by the
    calling exchange thread); on CPU the device vectors themselves."""

    def __init__(self, device: torch.device, numel: int) -> None:
        self.lane = lane(device)
        pinned = self.lane.cuda
        self.send = torch.empty(numel, pin_memory=True) if pinned else None
        self.recv = torch.empty(numel, pin_memory=True) if pinned else None

    def outgoing(self, src: torch.Tensor, ready: Ready = None) -> torch.Tensor:
        """``src`` where gloo can send it, once ``ready`` (called on the copy stream: a
        snapshot's, or a wait for the math that made ``src``) let it be read: on CPU ``src``
        itself."""
        with self.lane.copies():
            if ready is not None:
                ready()
            if self.send is None:
                return src
            self.send.copy_(src, non_blocking=True)
            done = self.lane.mark(blocking=True)
        assert done is not None
        done.synchronize()
        return self.send

    def inbox(self, dst: torch.Tensor) -> torch.Tensor:
        """Where gloo receives what is meant for ``dst``: on CPU ``dst`` itself."""
        return dst if self.recv is None else self.recv

    def land(self, dst: torch.Tensor) -> None:
        """Bring what :meth:`inbox` received into ``dst`` (on a GPU: copied, and waited for
        here, so the math stream that reads ``dst`` next never waits on a transfer)."""
        if self.recv is None:
            return
        with self.lane.copies():
            dst.copy_(self.recv, non_blocking=True)
            done = self.lane.mark(blocking=True)
        assert done is not None
        done.synchronize()


class DeviceStaging:
    """A model's snapshots (two vectors on its device, used in turn) and merges."""

    def __init__(self, model: torch.nn.Module) -> None:
        params = list(unwrap(model).parameters())
        self.device = params[0].device
        self.numel = sum(p.numel() for p in params)
        self.lane = lane(self.device)
        self.on_gpu = self.lane.cuda
        self._buffers: list[torch.Tensor] = []  # made at the first snapshots
        self._turn = 0
        self._gathered: Event = None

    def zeros(self, numel: int) -> torch.Tensor:
        """A float32 vector on the model's device (an exchange's pending sums)."""
        return self.lane.zeros(numel)

    def snapshot(self, model: torch.nn.Module) -> tuple[torch.Tensor, Ready]:
        """The weights as one float32 vector on their device, gathered on the math stream
        into the buffer not used last time, and the ``ready`` that makes a reader's current
        stream wait for the gather (None on CPU, where it is done on return). The buffer is
        overwritten two snapshots later: an exchange must be done with it by then."""
        if len(self._buffers) < 2:
            self._buffers.append(self.lane.zeros(self.numel))
        out = self._buffers[self._turn % len(self._buffers)]
        self._turn += 1
        with self.lane.math(after_caller=True):
            torch.cat([p.detach().reshape(-1).float() for p in unwrap(model).parameters()],
                      out=out)
            self._gathered = self.lane.mark()
        return out, None if self._gathered is None else partial(self.lane.wait, self._gathered)

    def before_update(self) -> None:
        """Before anything writes the weights again (the merge, the optimizer step): make the
        compute stream wait for the last gather. Deferred to here, it costs the compute
        stream nothing: the gather ran during forward and backward."""
        self.lane.wait(self._gathered)

    def add(self, model: torch.nn.Module, delta: torch.Tensor) -> None:
        """Add a flat delta into the parameters, in place, on the current stream (the caller
        has ordered it after whatever made the delta)."""
        params = list(unwrap(model).parameters())
        delta = delta.to(self.device)
        views = [v.view_as(p).to(p.dtype)
                 for v, p in zip(delta.split([p.numel() for p in params]), params, strict=True)]
        with torch.no_grad():
            torch._foreach_add_(params, views)
