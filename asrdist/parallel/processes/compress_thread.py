"""Compressed means started without waiting (streaming-diloco's ``--compress``), run on real
processes by a communication thread on a gloo group of its own.

Why a thread, not chained asynchronous collectives on the compute thread: a compressed mean
(:class:`~asrdist.parallel.rules.compress.CompressedMean`) is two collectives with maths between
them, the all-to-all's chunks decoded, summed and encoded again before the all-gather. Chained
on the compute thread, that middle step would run only when the compute thread next looks (at
the wait), so the all-gather, half the bytes, would overlap nothing; and a work's future
callback runs on gloo's own worker, where starting the next collective is not safe. The thread
runs the whole chain as soon as each part arrives.

The group is the thread's alone (gloo, every learner), so it never issues a collective on a
group the compute thread uses; it runs the means one at a time in the order they were started,
the same order on every learner, which is what matches them. The payloads cross as CPU tensors
(gloo); the maths runs on the vector's device (on its default stream, which the compute thread
uses too), as the blocking mean's does, so the bits are the blocking mean's. A failure ends the
thread and is raised at the wait, where the transport names the lost learner as it does for
any collective.
"""

from __future__ import annotations

import queue
import threading
from dataclasses import dataclass, field

import torch
import torch.distributed as dist

from asrdist.parallel.rules.compress import CompressedMean


def compressed_mean_over(group: dist.ProcessGroup | None, vector: torch.Tensor,
                         side: CompressedMean, through_host: bool = False) -> None:
    """Replace flat float32 ``vector`` by the learners' compressed mean over ``group`` (None:
    the default one): the reduce-scatter as one all-to-all of the chunk payloads, then an
    all-gather of the mean chunks. ``through_host``: the payloads cross as CPU tensors (a gloo
    group), the maths stays on the vector's device, so the bits are the same either way."""
    numel, n, device = vector.numel(), side.learners, vector.device
    wire = torch.device("cpu") if through_host else device
    with torch.no_grad():
        send = torch.cat(side.outgoing(vector)).to(wire)
        recv = torch.empty_like(send)
        dist.all_to_all_single(recv, send, group=group)
        mine = side.reduce([c.to(device) for c in recv.chunk(n)], numel).to(wire)
        chunks = [torch.empty_like(mine) for _ in range(n)]
        dist.all_gather(chunks, mine, group=group)
        vector.copy_(side.gather([c.to(device) for c in chunks], numel))


@dataclass
class MeanJob:
    """One started mean: ``vector`` holds it once ``done`` is set."""

    vector: torch.Tensor
    side: CompressedMean
    done: threading.Event = field(default_factory=threading.Event)


class CompressThread:
    """The communication thread of one learner's started compressed means, over ``group``."""

    def __init__(self, group: dist.ProcessGroup) -> None:
        self._group = group
        self._jobs: queue.Queue[MeanJob | None] = queue.Queue()
        self.error: Exception | None = None  # what ended the thread
        self._thread = threading.Thread(target=self._loop, name="asrdist-compressed-mean",
                                        daemon=True)
        self._thread.start()

    def start(self, vector: torch.Tensor, side: CompressedMean) -> MeanJob:
        """Queue the mean of flat float32 ``vector`` (read and written by the thread until
        the job is done)."""
        job = MeanJob(vector, side)
        self._jobs.put(job)
        return job

    def wait(self, job: MeanJob, poll_s: float = 1.0) -> None:
        """Block until ``job`` is done; if the thread ended first, raise what ended it."""
        while not job.done.wait(poll_s):
            if not self._thread.is_alive():
                break
        if not job.done.is_set():
            raise self.error or RuntimeError("the compressed mean's thread ended")

    def close(self, timeout_s: float) -> None:
        """Let the thread end once the means queued are done (none are: the strategy waited
        for them)."""
        self._jobs.put(None)
        self._thread.join(timeout_s)

    def _loop(self) -> None:
        while (job := self._jobs.get()) is not None:
            try:
                compressed_mean_over(self._group, job.vector, job.side, through_host=True)
            except Exception as exc:  # raised at the wait, where the lost learner is named
                self.error = exc
                return
            job.done.set()
