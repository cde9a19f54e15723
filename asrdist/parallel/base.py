"""The base of every multi-learner strategy: what they share around their transport
(:mod:`asrdist.parallel.transport`): the bookkeeping of a step, the learners leaving
together for the final average, and ``--compress`` (one
:class:`~asrdist.parallel.rules.compression.Compression`, saved under the strategy state's
``compress``).

With one learner (a world of one) nothing here communicates, so each strategy reduces to the
trainer's plain SGD.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import torch

from asrdist.parallel.options import CompressOptions
from asrdist.parallel.processes.transport import connect
from asrdist.parallel.rules.compression import Compression
from asrdist.parallel.rules.weights import flat_weights, unwrap
from asrdist.parallel.strategy import Learner, StoppedEarly, Strategy


class DistributedStrategy(Strategy):
    """Base of ssgd, adpsgd, hadpsgd, ma, bmuf and diloco; subclasses talk to the other
    learners through ``self.comm`` (real processes: torch.distributed's default group, which
    must be initialised for a world of more than one learner; the simulator: its clock).
    Their exchanges encode through ``self.compression``, made from ``options``."""

    def __init__(self, learner: Learner, options: CompressOptions | None = None) -> None:
        self.learner = learner
        self.rank, self.world_size = learner.rank, learner.world_size
        self.multi = self.world_size > 1
        self.comm = connect(learner)
        o = options or CompressOptions()
        self.compression = Compression(o.compress, self.world_size, self.rank, o.error_feedback,
                                       o.compress_rank)

    def before_step(self, model: torch.nn.Module, step: int) -> None:
        """The step's compute begins: the transport times it, so what a step spends beyond it
        is communication."""
        if self.multi:
            self.comm.compute_begins()

    def after_backward(self, model: torch.nn.Module, step: int) -> None:
        if self.multi:
            self.comm.compute_ends()

    # -- helpers for subclasses ----------------------------------------------------------------

    def _start_distance(self, model: torch.nn.Module) -> None:
        """Begin sampling the distance to the learners' mean (call from wrap_model)."""
        self.comm.watch_distance(lambda: flat_weights(model))

    def _leave_together(self, model: torch.nn.Module) -> None:
        """Wait for every learner to get here, then leave the exchange loop and stop the
        threads (the end of a run, or a preemption stop)."""
        self._wait_all_finished(model)
        self._before_final_average(model)
        self.comm.stop_services()

    def _finish(self, model: torch.nn.Module) -> None:
        """Wait for every learner to finish, stop the threads, and average all weights; raise
        StoppedEarly, without the average, if another learner was stopped by a signal."""
        if not self.multi:
            return
        self._leave_together(model)
        # also keeps learner 0 until all have left where it hosts the store (fail-stop runs)
        if self.comm.any_(False):
            raise StoppedEarly("another learner's stop signal")
        module = unwrap(model)
        self.average([*module.parameters(),
                      *(b for b in module.buffers() if torch.is_floating_point(b))])

    def _wait_all_finished(self, model: torch.nn.Module) -> None:
        """Subclass hook: wait until every learner has finished its steps."""
        self.comm.wait_all_finished()

    def _before_final_average(self, model: torch.nn.Module) -> None:
        """Subclass hook: leave the exchange loop once everyone has finished."""

    # -- Strategy API --------------------------------------------------------------------------

    def average(self, tensors: Iterable[torch.Tensor]) -> None:
        """Replace ``tensors`` on every learner by the learners' mean now (every learner calls
        it at the same point); a failure ends the job, named."""
        if self.multi:
            self.comm.average_all_(list(tensors))

    def finalize(self, model: torch.nn.Module) -> None:
        self._finish(model)

    def state_dict(self) -> dict[str, Any]:
        """``--compress``'s state (subclasses add theirs)."""
        return {"compress": self.compression.state_dict()} if self.compression.active else {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if self.compression.active and "compress" in state:
            self.compression.load_state_dict(state["compress"])

    def leader(self) -> int:
        gone = self.comm.departed()
        return min((r for r in range(self.world_size) if r not in gone), default=self.rank)

    def lockstep(self) -> tuple[tuple[int, ...], int]:
        """All learners, every step (ssgd; ma overrides the period)."""
        return tuple(range(self.world_size)), 1

    def stop_early(self, model: torch.nn.Module) -> None:
        if self.multi:
            self._leave_together(model)
            self.comm.any_(True)

    def metrics(self) -> dict[str, Any]:
        """The transport's figures since the previous call (on processes: see
        :class:`asrdist.parallel.rules.timing.StepTimes`, and the last sampled distance to the
        learners' mean)."""
        return self.comm.metrics()

    def abandon(self) -> None:
        self.comm.abandon()

    def close(self) -> None:
        """Stop the threads and release what holds process groups; call it before
        ``destroy_process_group``."""
        self.comm.close()
