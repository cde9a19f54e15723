"""DistributedDataParallel as ssgd and hadpsgd use it: an allreduce hook that names a lost
learner, ssgd's compressed gradient mean (:class:`GradientCodec`), and the reducer's release
before the process groups go.

(No ``from __future__ import annotations`` here: DDP checks the communication hook's
annotations at runtime.)
"""

from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks, powerSGD_hook

from asrdist.parallel.processes.health import Liveness
from asrdist.parallel.rules.compress import GradientCompression
from asrdist.parallel.rules.powersgd import Layouts
from asrdist.plaindata import mt19937_from_plain, mt19937_to_plain


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


@dataclass
class HookState:
    """What :func:`allreduce_mean_hook` needs: the learner's liveness (to name a lost learner),
    the group and its size."""

    liveness: Liveness
    group: dist.ProcessGroup | None
    size: int


def allreduce_mean_hook(
    state: HookState, bucket: dist.GradBucket
) -> torch.futures.Future[torch.Tensor]:
    """DDP's default allreduce-mean, but a failure names the lost learner and ends the job."""
    buf = bucket.buffer().div_(state.size)
    return _named(state, dist.all_reduce(buf, group=state.group, async_op=True).get_future())


def _named(state: HookState, fut: torch.futures.Future[Any]) -> torch.futures.Future[torch.Tensor]:
    """``fut``'s tensor (an allreduce's future holds a list of one) whose failure names the
    lost learner and ends the job."""

    def done(f: torch.futures.Future[Any]) -> torch.Tensor:
        try:
            value = f.value()
        except RuntimeError as exc:
            state.liveness.end_job(exc)
            raise
        return value[0] if isinstance(value, list) else value

    return fut.then(done)


class GradientCodec(GradientCompression):
    """ssgd's ``--compress`` on real processes: DDP's communication hook for each codec.

    ``bf16``/``fp16``: torch's ``bf16_compress_hook``/``fp16_compress_hook`` (each learner's
    bucket cast and divided by N, summed in that precision; no error feedback).
    ``powersgd``: torch's ``powerSGD_hook`` at rank ``rank`` (its own error feedback and warm
    start; torch's plain allreduce for the first two steps, whose buckets DDP rebuilds after
    the first). ``int8``/``fp8``/``1bit``: DDP's hook leaves each learner's gradients
    local and, after backward, :class:`~asrdist.parallel.rules.compress.CompressedMean` averages
    the whole flat gradient in parameter order with error feedback: one layout whatever DDP's
    buckets, so the simulator computes the same bits and a resume restores the residuals; it
    gives up DDP's overlap of the allreduce with backward."""

    def __init__(self, name: str, learners: int, rank: int, error_feedback: bool = True,
                 powersgd_rank: int = 1) -> None:
        super().__init__(name, learners, rank, error_feedback, powersgd_rank)
        self.power: Any = None  # torch's PowerSGDState, made with the group
        self.layouts: Layouts | None = None  # the buckets' layouts its state is in
        self._power_saved: dict[str, Any] | None = None
        self._power_counted = 0  # its count of the values it sent, at the last wire_bytes

    def register(self, ddp: torch.nn.parallel.DistributedDataParallel,
                 state: HookState) -> None:
        """Put the hook on ``ddp``."""
        if self.cast is not None:
            cast = (default_hooks.bf16_compress_hook if self.name == "bf16"
                    else default_hooks.fp16_compress_hook)

            def cast_hook(s: HookState, bucket: dist.GradBucket
                          ) -> torch.futures.Future[torch.Tensor]:
                return _named(s, cast(s.group, bucket))

            ddp.register_comm_hook(state, cast_hook)
        elif self.name == "powersgd":
            self.power = powerSGD_hook.PowerSGDState(
                process_group=state.group, matrix_approximation_rank=self.powersgd_rank,
                start_powerSGD_iter=2, use_error_feedback=self.error_feedback,
                warm_start=True, random_seed=0)
            self.layouts = Layouts(ddp.module.parameters())
            if self._power_saved is not None:
                self._load_power(self._power_saved)

            def power_hook(s: HookState, bucket: dist.GradBucket
                           ) -> torch.futures.Future[torch.Tensor]:
                self.layouts.follow(self.power, bucket)  # DDP rebuilds its buckets
                return _named(s, powerSGD_hook.powerSGD_hook(self.power, bucket))

            ddp.register_comm_hook(state, power_hook)
        else:
            ddp.register_comm_hook(state, local_hook)

    def wire_bytes(self, numel: int) -> int:
        """As :class:`GradientCompression`'s; PowerSGD's from its own count of what it sent
        since the last call (its factors P and Q, and the tensors it leaves whole), or the
        whole gradient in its first steps."""
        if self.power is not None:
            total = int(self.power.total_numel_after_compression)
            sent, self._power_counted = total - self._power_counted, total
            if sent:
                return 4 * sent
        return super().wire_bytes(numel)

    def state_dict(self) -> dict[str, Any]:
        if self.power is not None:  # its numpy generator as plain data, as checkpoints are
            saved = {k: getattr(self.power, k) for k in self.power.__slots__
                     if k not in ("process_group", "rng")}
            return {**saved, "rng": mt19937_to_plain(self.power.rng.get_state(legacy=False)),
                    "layouts": self.layouts.state_dict()}
        return super().state_dict()

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if self.name == "powersgd" and state:
            self._power_saved = state
            if self.power is not None:
                self._load_power(state)
        else:
            super().load_state_dict(state)

    def _load_power(self, state: dict[str, Any]) -> None:
        for k, v in state.items():
            if k == "layouts":
                self.layouts.load_state_dict(v)
            elif k == "rng":
                self.power.rng.set_state(mt19937_from_plain(v))
            else:
                setattr(self.power, k, v)
        self._power_counted = int(self.power.total_numel_after_compression)


def local_hook(state: HookState,
               bucket: dist.GradBucket) -> torch.futures.Future[torch.Tensor]:
    """No communication: the learner's own gradients stay (averaged after backward)."""
    fut: torch.futures.Future[torch.Tensor] = torch.futures.Future()
    fut.set_result(bucket.buffer())
    return fut
