"""The gradient noise scale B_simple of simulated learners (asrdist.train.noise_scale's
estimator), measured every ``every`` steps per learner.

The simulator holds every learner's weights and can draw any learner's batch of any step, so
a measurement takes the N learners' local gradients at their current weights on the batches
of their next step (B_small = b) and averages them (B_big = N b), as asrdist-train does across
lockstep learners. One learner takes its next two batches instead (B_big = 2 b). The
gradients are taken on a copy of a learner's model with the random state put back: the
simulation runs as it would without the measurement. Each costs N (at least 2) learner-steps
of forward and backward on the host.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import torch

from asrdist.simulate.world import LossFn, World
from asrdist.train.noise_scale import DECAY, NoiseScale, across_norms, flat_gradient


class NoiseProbe:
    """``batch``: chunks per learner per step; ``epoch_steps``: learner steps in one epoch of
    the corpus (0: records without epochs)."""

    def __init__(self, every: int, batch: int, epoch_steps: float = 0.0,
                 decay: float = DECAY) -> None:
        if every < 1 or batch < 1:
            raise ValueError(f"noise scale: every {every} steps, batch {batch}: both >= 1")
        self.every, self.batch, self.epoch_steps = every, batch, epoch_steps
        self.noise = NoiseScale(decay)
        self.records: list[dict[str, Any]] = []
        self._next = 0
        self._twin: torch.nn.Module | None = None

    def watch(self, world: World, loss_fn: LossFn,
              then: Callable[[], None] | None = None) -> Callable[[], None]:
        """The world's ``on_step``: ``then`` (the evaluator's), then a measurement when due;
        the first is taken before any step."""
        self._next = 0

        def on_step() -> None:
            if then is not None:
                then()
            self.maybe(world, loss_fn)

        self.maybe(world, loss_fn)
        return on_step

    def maybe(self, world: World, loss_fn: LossFn) -> None:
        total = world.total_steps()
        if total < self._next:
            return
        self._next = total - total % (self.every * world.n) + self.every * world.n
        self.measure(world, loss_fn)

    def measure(self, world: World, loss_fn: LossFn) -> dict[str, Any]:
        learners = world.learners
        if self._twin is None:
            self._twin = copy.deepcopy(learners[0].model)
        twin, n = self._twin, world.n
        grads = []
        with torch.random.fork_rng(devices=[]):
            for j in range(max(n, 2)):
                me = learners[j % n]
                twin.load_state_dict(me.model.state_dict())
                twin.train(me.model.training)
                grads.append(flat_gradient(twin, loss_fn(j % n, me.steps + j // n, twin)))
        found = self.noise.update(*across_norms(grads, [self.batch] * len(grads)))
        total = world.total_steps()
        row: dict[str, Any] = {"time_s": world.clock.now, "steps": total / n, **found}
        if self.epoch_steps > 0:
            row["epochs"] = total / self.epoch_steps
        self.records.append(row)
        return row
