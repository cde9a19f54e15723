"""The sampled distance of each learner's weights to the learners' mean (``dist_to_mean`` in
metrics.jsonl): how far apart averaging lets the learners drift."""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import timedelta

import torch
import torch.distributed as dist

from asrdist.errors import first_line
from asrdist.parallel.processes.health import abort


class DistanceMonitor:
    """Samples ||w_i - mean_j w_j|| every ``period_s`` from a thread with its own group.

    Sampling on the compute thread would be a global barrier; this thread blocks only itself.
    Each sample starts with an allreduce(MIN) of a "keep going" flag, so all learners leave the
    loop at the same sample once any of them stops.
    """

    def __init__(self, read: Callable[[], torch.Tensor], period_s: float, timeout_s: float):
        self.last: float | None = None
        self._read, self._period = read, period_s
        self._group = dist.new_group(timeout=timedelta(seconds=timeout_s), backend="gloo")
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="asrdist-distance", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        n = dist.get_world_size()
        try:
            while True:
                self._stop.wait(self._period)
                flag = torch.tensor([0.0 if self._stop.is_set() else 1.0])
                dist.all_reduce(flag, op=dist.ReduceOp.MIN, group=self._group)
                if flag.item() == 0.0:
                    return
                w = self._read()
                mean = w.clone()
                dist.all_reduce(mean, group=self._group)
                self.last = float((w - mean / n).norm())
        except RuntimeError as exc:
            abort(dist.get_rank(), f"distance sampling failed: {first_line(exc)}")

    def stop(self, wait: bool = True) -> None:
        """Leave the loop at the next sample; ``wait``: until the thread has (every learner
        stops it, or the next sample waits for the others until the timeout)."""
        self._stop.set()
        if wait:
            self._thread.join()
