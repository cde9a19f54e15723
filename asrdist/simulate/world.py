"""The simulated learners and what every strategy's program does with them: compute a
gradient, take an optimizer step, average gradients or weights across a group, and record.

Each learner has its own module, optimizer (momentum state) and data shard (``loss_fn`` is
called with the learner's index and step). Memory and time grow linearly in the number of
learners: nothing is shared between them but the clock.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from asrdist.parallel.weights import flat_weights
from asrdist.simulate.clock import Clock, Meeting
from asrdist.simulate.speed import SpeedModel

LossFn = Callable[[int, int, torch.nn.Module], torch.Tensor]
EvalFn = Callable[[torch.nn.Module], dict[str, float]]


@dataclass
class SimLearner:
    index: int
    model: torch.nn.Module
    optimizer: torch.optim.Optimizer
    steps: int = 0
    merged: int = 0  # averaging updates merged into the weights (ADPSGD)
    history: list[torch.Tensor] = field(default_factory=list)


def float_tensors(model: torch.nn.Module) -> list[torch.Tensor]:
    """Parameters and floating buffers: what the exported average covers (as ``_finish``)."""
    return list(model.parameters()) + [b for b in model.buffers() if torch.is_floating_point(b)]


@torch.no_grad()
def average_into(tensor_lists: list[list[torch.Tensor]]) -> None:
    """Replace the i-th tensor of every list by the mean of the i-th tensors (an allreduce
    of sum(t / n) in learner order, as DDP's hook and ``average_parameters`` compute it)."""
    n = len(tensor_lists)
    for group in zip(*tensor_lists, strict=True):
        mean = torch.stack([t / n for t in group]).sum(0)
        for t in group:
            t.copy_(mean)


class World:
    """Learners, clock, speed model and the run's records."""

    def __init__(self, learners: list[SimLearner], speed: SpeedModel, loss_fn: LossFn,
                 grad_clip: float = 0.0, keep_history: bool = False) -> None:
        self.learners, self.speed, self.loss_fn = learners, speed, loss_fn
        self.grad_clip, self.keep_history = grad_clip, keep_history
        self.clock = Clock()
        self.nbytes = 4 * sum(p.numel() for p in learners[0].model.parameters())
        self.staleness: Counter[int] = Counter()
        self.on_step: Callable[[], None] | None = None
        self._meetings: dict[Any, Meeting] = {}

    @property
    def n(self) -> int:
        return len(self.learners)

    def meeting(self, key: Any, members: list[int], cost_s: float,
                action: Callable[[], float | None] | None = None) -> Meeting:
        """The meeting ``key`` of ``members`` (made by the first to ask; forgotten once held)."""
        found = self._meetings.get(key)
        if found is None:
            def held() -> float | None:
                del self._meetings[key]
                return action() if action is not None else None

            found = self._meetings[key] = Meeting(tuple(members), cost_s, held)
        return found

    def compute(self, i: int, step: int) -> float:
        """Learner i's forward and backward of ``step`` on its current weights; returns the
        simulated time it finishes."""
        lr = self.learners[i]
        loss = self.loss_fn(i, step, lr.model)
        lr.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        return self.clock.now + self.speed.step_s(i, step)

    def optimizer_step(self, i: int) -> float:
        """Clip (as the trainer does, after the strategy's after_backward) and step; returns
        the time the step and the next batch are done."""
        lr = self.learners[i]
        if self.grad_clip > 0:
            torch.nn.utils.clip_grad_norm_(lr.model.parameters(), self.grad_clip)
        lr.optimizer.step()
        return self.clock.now + self.speed.update_s

    def end_step(self, i: int) -> None:
        lr = self.learners[i]
        lr.steps += 1
        if self.keep_history:
            lr.history.append(flat_weights(lr.model))
        if self.on_step is not None:
            self.on_step()

    def mean_grads(self, members: list[int]) -> None:
        average_into([[p.grad for p in self.learners[i].model.parameters()] for i in members])

    def mean_weights(self, members: list[int]) -> None:
        average_into([list(self.learners[i].model.parameters()) for i in members])

    def copy_weights(self, src: int, members: list[int]) -> None:
        """DDP's broadcast of the first learner's weights at wrap time."""
        with torch.no_grad():
            for i in members:
                for p, q in zip(self.learners[i].model.parameters(),
                                self.learners[src].model.parameters(), strict=True):
                    p.copy_(q)

    def total_steps(self) -> int:
        return sum(lr.steps for lr in self.learners)

    def distance_to_mean(self) -> float:
        """Root mean square over learners of ||w_i - mean||."""
        flats = torch.stack([flat_weights(lr.model) for lr in self.learners])
        d = (flats - flats.mean(0)).norm(dim=1)
        return math.sqrt(float((d * d).mean()))

    def summary(self) -> dict[str, Any]:
        waits = [self.clock.waited.get(i, 0.0) for i in range(self.n)]
        return {"time_s": self.clock.now, "wait_s": waits,
                "staleness": dict(sorted(self.staleness.items()))}
