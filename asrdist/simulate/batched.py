"""The simulated learners' forward and backward passes computed together.

A learner's step computes its loss and gradient from two things only: the weights it holds
when its forward pass starts, and its batch. So when a learner starts computing (its
``train_step`` calls the loss), :class:`Batcher` takes a copy of its weights and its batch and
leaves the computation pending; the learner then spends its compute time on the clock as
before. When the first pending learner needs its result (its compute time has passed), every
learner pending at that moment is evaluated at once, in groups of at most ``group`` learners
(:mod:`asrdist.simulate.stacked`: one batched computation over a learners dimension), and each
keeps its own loss and gradient until it asks. Synchronous learners, which start together,
are evaluated together; asynchronous ones, at different simulated times on different weights,
are evaluated together with whoever started computing before the first of them finished.
Nothing else changes: the learner's ``loss.backward()`` puts its gradient into its parameters'
``.grad`` (through their hooks, as a real backward pass does), and the strategy's hooks run
around it in the trainer's order.

Only a :class:`FrameLoss` (whose batches are known, not just a closure that calls the model) on
a model :func:`~asrdist.simulate.stacked.stackable` can wait; any other loss is computed at
once, on the learner's own model, as before.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from asrdist.simulate.stacked import stackable, stacked_frame_loss
from asrdist.train.loss import frame_loss

Batch = tuple[torch.Tensor, torch.Tensor]


@dataclass(frozen=True)
class FrameLoss:
    """Learner i's loss at its step k: the trainer's frame cross-entropy on ``batch(i, k)``
    (features, labels). A loss function of the simulator (``loss(i, k, model)``) whose batches
    the simulator can read, so that learners can be computed together."""

    batch: Callable[[int, int], Batch]

    def __call__(self, i: int, k: int, model: torch.nn.Module) -> torch.Tensor:
        x, y = self.batch(i, k)
        return frame_loss(model, x, y)


class _Deferred(torch.autograd.Function):
    """A loss whose gradients were computed already: backward hands them to the parameters."""

    @staticmethod
    def forward(ctx, value: torch.Tensor, grads: tuple[torch.Tensor, ...],  # type: ignore[override]
                *params: torch.Tensor) -> torch.Tensor:
        ctx.grads = grads
        return value.clone()

    @staticmethod
    def backward(ctx, grad_out: torch.Tensor):  # type: ignore[override]
        return (None, None, *[g * grad_out for g in ctx.grads])


class Pending:
    """One learner's step computation: done already, or waiting for its group."""

    def __init__(self, batcher: Batcher | None, model: torch.nn.Module,
                 weights: list[torch.Tensor] | None = None, batch: Batch | None = None,
                 loss: torch.Tensor | None = None) -> None:
        self.batcher, self.model, self.weights, self.batch = batcher, model, weights, batch
        self.value: torch.Tensor | None = None
        self.grads: tuple[torch.Tensor, ...] = ()
        self._loss = loss

    def loss(self) -> torch.Tensor:
        """The learner's loss, ready for its ``backward()``."""
        if self._loss is None:
            if self.value is None:
                assert self.batcher is not None
                self.batcher.evaluate()
            assert self.value is not None
            params = list(self.model.parameters())
            self._loss = _Deferred.apply(self.value, self.grads, *params)
            self.weights = self.batch = None
        return self._loss


class Batcher:
    """Pending learners' steps, evaluated together when the first result is needed."""

    def __init__(self, loss_fn: Callable[[int, int, torch.nn.Module], torch.Tensor],
                 group: int) -> None:
        self.loss_fn, self.group = loss_fn, group
        self._pending: list[Pending] = []

    def submit(self, i: int, k: int, model: torch.nn.Module) -> Pending:
        """Learner i starts its step k on ``model``: pending if it can wait, else computed."""
        if not isinstance(self.loss_fn, FrameLoss) or not stackable(model):
            return Pending(None, model, loss=self.loss_fn(i, k, model))
        with torch.no_grad():
            weights = [p.detach().clone() for p in model.parameters()]
        pending = Pending(self, model, weights, self.loss_fn.batch(i, k))
        self._pending.append(pending)
        return pending

    def evaluate(self) -> None:
        """Every pending step, in groups of learners of one architecture and batch shape."""
        todo, self._pending = self._pending, []
        groups: dict[tuple, list[Pending]] = {}
        for p in todo:
            assert p.batch is not None
            key = (type(p.model), tuple(p.batch[0].shape), tuple(p.batch[1].shape))
            groups.setdefault(key, []).append(p)
        for members in groups.values():
            for start in range(0, len(members), self.group):
                _evaluate(members[start:start + self.group])


def _evaluate(members: list[Pending]) -> None:
    """One batched forward and backward of ``members`` (same architecture and batch shape)."""
    template = members[0].model
    names = [name for name, _ in template.named_parameters()]
    stacked = [torch.stack(ws).requires_grad_() for ws in
               zip(*[m.weights for m in members], strict=True)]  # type: ignore[misc]
    feats = torch.stack([m.batch[0] for m in members])  # type: ignore[index]
    labels = torch.stack([m.batch[1] for m in members])  # type: ignore[index]
    with torch.enable_grad():
        losses = stacked_frame_loss(template, dict(zip(names, stacked, strict=True)), feats,
                                    labels)
        grads = torch.autograd.grad(losses.sum(), stacked)
    values = losses.detach()
    for g, m in enumerate(members):
        m.value = values[g]
        m.grads = tuple(grad[g] for grad in grads)
