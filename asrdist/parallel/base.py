"""What every multi-learner strategy shares: timing metrics, liveness, slow-learner injection,
sampled distance to the learners' mean, the final average, flat weight vectors, and the DDP
communication hook that names a lost learner.

With one learner (a world of one) every helper here does nothing, so each strategy reduces to
the trainer's plain SGD. (No ``from __future__ import annotations`` here: DDP checks the
communication hook's annotations at runtime.)
"""

import threading
import time
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist

from asrdist.errors import first_line
from asrdist.parallel.health import STORE_LOST, Liveness, abort
from asrdist.parallel.options import CommonOptions
from asrdist.parallel.preempt import StoppedEarly
from asrdist.parallel.slow import SlowDown, parse_slow_learner
from asrdist.parallel.strategy import Learner, Strategy


def unwrap(model: torch.nn.Module) -> torch.nn.Module:
    """The plain module under a DistributedDataParallel wrapper."""
    return model.module if isinstance(model, torch.nn.parallel.DistributedDataParallel) else model


def release_reducer(ddp: torch.nn.parallel.DistributedDataParallel) -> None:
    """Destroy DDP's reducer now, while the process groups are still registered.

    The reducer owns a C++ reference to its group and is destroyed with the GIL held. Left to
    die with the wrapper after ``destroy_process_group``, it is the group's last owner, so the
    group's destructor joins the gloo worker threads under the GIL; a worker still freeing a
    finished collective whose tensor Python has already dropped needs the GIL to free it: the
    learner hangs at exit. Destroyed here, it is not the last owner, and
    ``destroy_process_group`` frees the group through its Python binding, which releases the
    GIL first. The wrapper cannot train afterwards.
    """
    for name in ("logger", "reducer"):  # DDP's logger holds the reducer too
        if name in ddp.__dict__:
            delattr(ddp, name)


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

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


class DistributedStrategy(Strategy):
    """Base of ssgd, adpsgd, hadpsgd and ma; subclasses call the ``_`` helpers from hooks.

    A world of more than one learner needs torch.distributed's default group initialised.
    """

    def __init__(self, learner: Learner, options: CommonOptions) -> None:
        self.learner = learner
        self.rank, self.world_size = learner.rank, learner.world_size
        self.timeout_s = options.exchange_timeout
        slow = parse_slow_learner(options.slow_learner)
        self._slow = SlowDown(slow[1] if slow and slow[0] == self.rank else 1.0)
        self._distance_every_s = options.distance_every
        self.multi = self.world_size > 1
        self.liveness = Liveness(self.rank, self.world_size, self.timeout_s) if self.multi else None
        self._distance: DistanceMonitor | None = None
        self._ddps: list[weakref.ref[torch.nn.parallel.DistributedDataParallel]] = []
        self._sums = {"fwd_bwd_s": 0.0, "comm_wait_s": 0.0, "slowdown_s": 0.0}
        self._staleness: list[int] = []
        self._t_compute: float | None = None

    # -- helpers for subclasses ----------------------------------------------------------------

    def _start_distance(self, model: torch.nn.Module) -> None:
        """Begin sampling the distance to the learners' mean (call from wrap_model)."""
        if self.multi and self._distance_every_s > 0:
            self._distance = DistanceMonitor(
                lambda: flat_weights(model), self._distance_every_s, self.timeout_s
            )

    def _track_ddp(self, ddp: torch.nn.parallel.DistributedDataParallel) -> None:
        """Remember a DDP wrapper made in wrap_model, to release its reducer in close()."""
        self._ddps.append(weakref.ref(ddp))  # weak: the reducer's comm hook holds the strategy

    def _begin_compute(self) -> None:
        if self.liveness is not None:
            self.liveness.progress()
        self._slow.start()
        self._t_compute = time.perf_counter()

    def _end_compute(self) -> None:
        if self.liveness is not None:
            self.liveness.progress()
        self._sums["slowdown_s"] += self._slow.stop()
        if self._t_compute is not None:
            self._sums["fwd_bwd_s"] += time.perf_counter() - self._t_compute
            self._t_compute = None

    @contextmanager
    def _waiting(self) -> Iterator[None]:
        """Time spent blocked on communication; a failed collective ends the job, named."""
        t0 = time.perf_counter()
        try:
            yield
        except RuntimeError as exc:
            assert self.liveness is not None
            abort(self.rank, f"{self.liveness.explain(exc)}; ending the job")
        finally:
            self._sums["comm_wait_s"] += time.perf_counter() - t0

    def _record_staleness(self, value: int) -> None:
        self._staleness.append(value)

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
        tensors = list(module.parameters()) + [
            b for b in module.buffers() if torch.is_floating_point(b)
        ]
        with self._waiting(), torch.no_grad():
            flat = torch.cat([t.detach().reshape(-1) for t in tensors])
            dist.all_reduce(flat)
            flat /= self.world_size
            offset = 0
            for t in tensors:
                t.copy_(flat[offset : offset + t.numel()].view_as(t))
                offset += t.numel()

    def _before_final_average(self, model: torch.nn.Module) -> None:
        """Subclass hook: leave the exchange loop once everyone has finished."""

    # -- Strategy API --------------------------------------------------------------------------

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
        """Figures since the previous call, plus running totals.

        fwd_bwd_s: seconds from ``before_step`` to ``after_backward`` (the gradient, including
        any injected slow-down); comm_wait_s: seconds blocked on communication in the hooks;
        slowdown_s: seconds slept by ``--slow-learner``; staleness: see the strategy.
        """
        out: dict[str, Any] = {k: round(v, 6) for k, v in self._sums.items()}
        self._sums = dict.fromkeys(self._sums, 0.0)
        if self._staleness:
            out["staleness"] = sum(self._staleness) / len(self._staleness)
            out["staleness_max"] = max(self._staleness)
            self._staleness = []
        if self._distance is not None and self._distance.last is not None:
            out["dist_to_mean"] = self._distance.last
        return out

    def close(self) -> None:
        """Stop the threads and release the DDP reducers (see :func:`release_reducer`); call
        it before ``destroy_process_group``."""
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


@dataclass
class HookState:
    """What :func:`allreduce_mean_hook` needs: the strategy (to name a lost learner), the group
    and its size."""

    strategy: DistributedStrategy
    group: dist.ProcessGroup | None
    size: int


def allreduce_mean_hook(
    state: HookState, bucket: dist.GradBucket
) -> torch.futures.Future[torch.Tensor]:
    """DDP's default allreduce-mean, but a failure names the lost learner and ends the job."""
    buf = bucket.buffer().div_(state.size)
    fut = dist.all_reduce(buf, group=state.group, async_op=True).get_future()

    def done(f: torch.futures.Future[Any]) -> torch.Tensor:
        try:
            return f.value()[0]
        except RuntimeError as exc:
            s = state.strategy
            assert s.liveness is not None
            abort(s.rank, f"{s.liveness.explain(exc)}; ending the job")
            raise

    return fut.then(done)
