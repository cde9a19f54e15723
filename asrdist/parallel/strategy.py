"""The contract between the trainer and a distributed strategy, and the one loop that drives it.

A strategy is a small object with hooks, like torch.distributed.algorithms.model_averaging's
averagers; the trainer, the multi-process tests and the benchmarks all run :func:`train_step`,
so every caller calls the hooks in the same order::

    model = strategy.wrap_model(model)      # once, before the optimizer is built
    # each step k (the trainer owns k; strategies keep no step counter of their own):
    strategy.before_step(model, k)          # e.g. start an asynchronous exchange
    loss = forward + loss; zero_grad; loss.backward()  # fp16: scaled, then unscaled
    strategy.after_backward(model, k)       # e.g. allreduce gradients, finish an exchange
    clip the gradient; optimizer.step()
    strategy.after_step(model, k)           # e.g. periodic weight averaging
    # before a checkpoint is saved or the model evaluated (same step on every learner):
    strategy.sync(model)                    # leave in the model the weights to save/evaluate
    strategy.state_dict()                   # then the strategy's own state; no side effects
    # at the end:
    strategy.finalize(model)                # the exported model: the learners' average
    # or, preempted (a signal), after the last checkpoint: leave without the final average
    strategy.stop_early(model)
    strategy.close()

``sync`` exists because an asynchronous strategy has exchanges in flight between steps:
ADPSGD merges them into the weights there, so a checkpoint holds them and a resumed run
continues from the same weights. A strategy with nothing in flight leaves it a no-op.

To add a strategy: write one module with a :class:`Strategy` subclass (usually of
:class:`asrdist.parallel.base.DistributedStrategy`), a frozen dataclass of its options, and one
:func:`asrdist.parallel.registry.register` call (see that module). The flags, YAML keys and the
README's ``--algo`` table come from the registry. A strategy talks to other learners only
through its transport (:mod:`asrdist.parallel.transport`; ``Learner.transport``), so the same
module runs on real processes and in the simulator.
"""

from __future__ import annotations

import socket
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import torch
import torch.distributed as dist

if TYPE_CHECKING:
    from asrdist.parallel.transport import Transport


class StoppedEarly(Exception):  # noqa: N818 - an outcome, not a failure
    """Raised by a strategy's ``finalize`` on a learner that finished its steps while another
    was stopped by a signal: there is no final average; the run continues with --resume."""


@dataclass(frozen=True)
class Learner:
    """Who this learner is: built once by asrdist.parallel.launch.rendezvous.join_world."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    node: str = ""  # learners with the same node name share a machine (hadpsgd's super-learner)
    # how it talks to the others (asrdist.parallel.transport); None: torch.distributed's
    # default group (asrdist.parallel.processes.transport), the simulator gives its own
    transport: Transport | None = field(default=None, compare=False, repr=False)

    @classmethod
    def current(cls) -> Learner:
        """This process as torch.distributed's default group sees it (a world of one if none);
        for callers that initialised the group themselves (tests, benchmarks)."""
        host = socket.gethostname()
        if dist.is_available() and dist.is_initialized():
            return cls(dist.get_rank(), dist.get_world_size(), 0, host)
        return cls(node=host)


class Strategy:
    """Base class: a no-op for every hook (one learner, plain SGD)."""

    name = "single"

    def wrap_model(self, model: torch.nn.Module) -> torch.nn.Module:
        """Return the module the trainer runs forward/backward on (e.g. a DDP wrapper)."""
        return model

    def before_step(self, model: torch.nn.Module, step: int) -> None:
        """Called before the forward pass of ``step``."""

    def after_backward(self, model: torch.nn.Module, step: int) -> None:
        """Called after ``loss.backward()`` and before gradient clipping and the optimizer."""

    def after_step(self, model: torch.nn.Module, step: int) -> None:
        """Called after ``optimizer.step()`` of ``step``."""

    def sync(self, model: torch.nn.Module) -> None:
        """Bring the weights up to date (merge what is in flight) before they are saved or
        evaluated; every learner calls it at the same step."""

    def finalize(self, model: torch.nn.Module) -> None:
        """Leave in ``model`` the weights to export (the average of all learners); raise
        :class:`StoppedEarly` if another learner stopped
        early."""

    def metrics(self) -> dict[str, Any]:
        """Per-learner figures for metrics.jsonl (communication wait, exchanges, ...)."""
        return {}

    def leader(self) -> int:
        """The learner that writes the run's shared outputs (final.pt, the progress bar):
        learner 0, or in an elastic run the lowest one not dropped (as far as this learner
        knows; after :meth:`finalize` every survivor names the same)."""
        return 0

    def state_dict(self) -> dict[str, Any]:
        """Strategy state for ``--resume`` (ring-schedule state, ...); no side effects."""
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what :meth:`state_dict` returned."""

    def lockstep(self) -> tuple[tuple[int, ...], int]:
        """The learners that take every step together with this one (they must stop and resume
        at the same step) and every how many steps they meet: none can run past the next
        multiple of it without the others. A learner alone in its set stops and resumes at its
        own step (asynchronous strategies); collective once, on every learner."""
        return (0,), 1

    def stop_early(self, model: torch.nn.Module) -> None:
        """Leave a run that stops before its end (preemption) together with the other learners,
        without the final average: every learner calls it after its last checkpoint."""

    def abandon(self) -> None:
        """This learner is ending for an error (``close`` follows): let go of whatever would
        make ``close`` wait on another learner (a thread in a collective is left to die with
        the process), so that the error is reported at once, not after a timeout."""

    def close(self) -> None:
        """Stop background threads and release process groups."""


class Single(Strategy):
    """One learner: plain SGD."""


def train_step(
    strategy: Strategy,
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    step: int,
    loss_fn: Callable[[torch.nn.Module], torch.Tensor],
    grad_clip: float = 0.0,
    scaler: torch.amp.GradScaler | None = None,
) -> torch.Tensor:
    """One SGD step of ``model`` (the wrapped module) with the hooks in contract order;
    returns the loss, detached (reading it is left to the caller: on GPU it is a sync).

    ``scaler`` (fp16): the loss is scaled for backward and the gradients unscaled right after
    it, so the strategies' hooks and clipping see true gradients (DDP's allreduce during
    backward is linear, so it may see scaled ones); a step whose gradients are not finite is
    skipped and the scale lowered, as :class:`torch.amp.GradScaler` does."""
    strategy.before_step(model, step)
    loss = loss_fn(model)
    optimizer.zero_grad(set_to_none=True)
    if scaler is None:
        loss.backward()
    else:
        scaler.scale(loss).backward()
        scaler.unscale_(optimizer)
    strategy.after_backward(model, step)
    if grad_clip > 0:
        torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
    if scaler is None:
        optimizer.step()
    else:
        scaler.step(optimizer)
        scaler.update()
    strategy.after_step(model, step)
    return loss.detach()
