"""The base of every multi-learner strategy: it puts together what they share, each from its
own module: liveness (health), slow-learner injection (slow), timing metrics (timing), the
sampled distance to the learners' mean (distance), DDP reducers to release (ddp), and the
learners leaving together for the final average (average).

With one learner (a world of one) every helper here does nothing, so each strategy reduces to
the trainer's plain SGD.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

import torch
import torch.distributed as dist

from asrdist.errors import first_line
from asrdist.parallel.average import average_tensors
from asrdist.parallel.ddp import release_reducer
from asrdist.parallel.distance import DistanceMonitor
from asrdist.parallel.health import STORE_LOST, Liveness, abort
from asrdist.parallel.options import CommonOptions
from asrdist.parallel.preempt import StoppedEarly
from asrdist.parallel.slow import SlowDown
from asrdist.parallel.strategy import Learner, Strategy
from asrdist.parallel.timing import StepTimes
from asrdist.parallel.weights import flat_weights, unwrap


class DistributedStrategy(Strategy):
    """Base of ssgd, adpsgd, hadpsgd and ma; subclasses call the ``_`` helpers from hooks.

    A world of more than one learner needs torch.distributed's default group initialised.
    """

    def __init__(self, learner: Learner, options: CommonOptions) -> None:
        self.learner = learner
        self.rank, self.world_size = learner.rank, learner.world_size
        self.timeout_s = options.exchange_timeout
        self._slow = SlowDown.of_learner(options.slow_learner, self.rank)
        self._distance_every_s = options.distance_every
        self.multi = self.world_size > 1
        self.liveness = Liveness(self.rank, self.world_size, self.timeout_s) if self.multi else None
        self._distance: DistanceMonitor | None = None
        self._ddps: list[weakref.ref[torch.nn.parallel.DistributedDataParallel]] = []
        self._times = StepTimes()

    # -- helpers for subclasses ----------------------------------------------------------------

    def _start_distance(self, model: torch.nn.Module) -> None:
        """Begin sampling the distance to the learners' mean (call from wrap_model)."""
        if self.multi and self._distance_every_s > 0:
            self._distance = DistanceMonitor(
                lambda: flat_weights(model), self._distance_every_s, self.timeout_s
            )

    def _track_ddp(self, ddp: torch.nn.parallel.DistributedDataParallel) -> None:
        """Remember a DDP wrapper made in wrap_model, to release its reducer in close()."""
        self._ddps.append(weakref.ref(ddp))  # weak: a wrapper gone needs no release

    def _begin_compute(self) -> None:
        if self.liveness is not None:
            self.liveness.progress()
        self._slow.start()
        self._times.begin_compute()

    def _end_compute(self) -> None:
        if self.liveness is not None:
            self.liveness.progress()
        self._times.end_compute(self._slow.stop())

    @contextmanager
    def _waiting(self) -> Iterator[None]:
        """Time spent blocked on communication; a failed collective ends the job, named."""
        with self._times.waiting():
            try:
                yield
            except RuntimeError as exc:
                assert self.liveness is not None
                self.liveness.end_job(exc)

    def _record_staleness(self, value: int) -> None:
        self._times.staleness(value)

    def _leave_together(self, model: torch.nn.Module) -> None:
        """Wait for every learner to get here, then leave the exchange loop and stop the
        threads (the end of a run, or a preemption stop)."""
        assert self.liveness is not None
        try:
            self.liveness.wait_all_finished()
        except (RuntimeError, OSError) as exc:  # the store lives in learner 0's process
            abort(self.rank, f"{STORE_LOST}: {first_line(exc)}", post=False)
        self._before_final_average(model)
        if self._distance is not None:
            self._distance.stop()
            self._distance = None
        self.liveness.stop()

    def _anyone_stopped_early(self, me: bool) -> bool:
        """After :meth:`_leave_together`: whether any learner stops early (a signal); also
        keeps learner 0, the store's host, until all have left the store."""
        flag = torch.tensor([1.0 if me else 0.0])
        with self._waiting():
            dist.all_reduce(flag, op=dist.ReduceOp.MAX)
        return flag.item() > 0

    def _finish(self, model: torch.nn.Module) -> None:
        """Wait for every learner to finish, stop the threads, and average all weights; raise
        StoppedEarly, without the average, if another learner was stopped by a signal."""
        if not self.multi:
            return
        self._leave_together(model)
        if self._anyone_stopped_early(False):
            raise StoppedEarly("another learner's stop signal")
        module = unwrap(model)
        self.average([*module.parameters(),
                      *(b for b in module.buffers() if torch.is_floating_point(b))])

    def _before_final_average(self, model: torch.nn.Module) -> None:
        """Subclass hook: leave the exchange loop once everyone has finished."""

    # -- Strategy API --------------------------------------------------------------------------

    def average(self, tensors: Iterable[torch.Tensor]) -> None:
        """Replace ``tensors`` on every learner by the learners' mean now (every learner calls
        it at the same point); a failure ends the job, named."""
        if self.multi:
            with self._waiting():
                average_tensors(tensors, self.world_size)

    def finalize(self, model: torch.nn.Module) -> None:
        self._finish(model)

    def lockstep(self) -> tuple[tuple[int, ...], int]:
        """All learners, every step (ssgd; ma overrides the period)."""
        return tuple(range(self.world_size)), 1

    def stop_early(self, model: torch.nn.Module) -> None:
        if self.multi:
            self._leave_together(model)
            self._anyone_stopped_early(True)

    def metrics(self) -> dict[str, Any]:
        """Figures since the previous call (see :class:`asrdist.parallel.timing.StepTimes`),
        plus the last sampled distance to the learners' mean."""
        out = self._times.report()
        if self._distance is not None and self._distance.last is not None:
            out["dist_to_mean"] = self._distance.last
        return out

    def abandon(self) -> None:
        """The distance thread, whose next collective waits for the others' next sample, is
        told to stop but not waited for."""
        if self._distance is not None:
            self._distance.stop(wait=False)
            self._distance = None

    def close(self) -> None:
        """Stop the threads and release the DDP reducers (see
        :func:`asrdist.parallel.ddp.release_reducer`); call it before
        ``destroy_process_group``."""
        if self._distance is not None:
            self._distance.stop()
            self._distance = None
        if self.liveness is not None:
            self.liveness.stop()
        for ref in self._ddps:
            ddp = ref()
            if ddp is not None:
                release_reducer(ddp)
        self._ddps = []
