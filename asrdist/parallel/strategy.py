"""The hooks a distributed strategy implements; the trainer calls them and knows nothing else.

A strategy is a small object, like torch.distributed.algorithms.model_averaging's averagers.
The trainer's step is, in order:

    model = strategy.wrap_model(model)            # once, before the optimizer is built
    strategy.before_step(model, step)             # e.g. start an asynchronous exchange
    loss.backward()
    strategy.after_backward(model, step)          # e.g. allreduce gradients, finish an exchange
    optimizer.step()
    strategy.after_step(model, optimizer, step)   # e.g. periodic weight averaging
    ...
    strategy.finalize(model)                      # the exported model: the learners' average

``Single`` is the one-learner strategy: every hook does nothing, so the trainer with
``Single`` is plain SGD.
"""

from __future__ import annotations

from typing import Any

import torch


class Strategy:
    """Base class: a no-op for every hook (one learner, plain SGD)."""

    name = "single"

    def wrap_model(self, model: torch.nn.Module) -> torch.nn.Module:
        """Return the module the trainer runs forward/backward on (e.g. a DDP wrapper)."""
        return model

    def before_step(self, model: torch.nn.Module, step: int) -> None:
        """Called before the forward pass of ``step``."""

    def after_backward(self, model: torch.nn.Module, step: int) -> None:
        """Called after ``loss.backward()`` and before ``optimizer.step()``."""

    def after_step(
        self, model: torch.nn.Module, optimizer: torch.optim.Optimizer, step: int
    ) -> None:
        """Called after ``optimizer.step()``."""

    def finalize(self, model: torch.nn.Module) -> None:
        """Leave in ``model`` the weights to export (the average of all learners)."""

    def metrics(self) -> dict[str, Any]:
        """Per-learner figures for metrics.jsonl (communication wait, exchanges, ...)."""
        return {}

    def state_dict(self) -> dict[str, Any]:
        """Strategy state for ``--resume`` (step counters, ring-schedule state, ...)."""
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what :meth:`state_dict` returned."""

    def close(self) -> None:
        """Stop background threads and release process groups."""


class Single(Strategy):
    """One learner: plain SGD."""
