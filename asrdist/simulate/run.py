"""Run N simulated learners of one strategy and report what the studies need.

The learners' mean (what a real run exports) is evaluated every ``eval_every`` steps per
learner (counted over all learners, so asynchronous learners at different steps are fine):
held-out figures from ``eval_fn``, against simulated wall time, steps and epochs, with the
distance of the learners to their mean. At the end: the staleness histogram, each learner's
time spent waiting, and the exported average.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import torch

from asrdist.errors import AsrdistError
from asrdist.parallel import registry
from asrdist.parallel.weights import flat_weights
from asrdist.simulate.noise import NoiseProbe
from asrdist.simulate.programs import spawn
from asrdist.simulate.speed import SpeedModel
from asrdist.simulate.world import EvalFn, LossFn, SimLearner, World, average_into, float_tensors


@dataclass
class Result:
    records: list[dict[str, float]]  # one per evaluation
    learners: list[torch.Tensor]  # each learner's flat weights before the final average
    final: torch.Tensor  # the exported average's flat weights
    summary: dict[str, Any]  # time_s, wait_s (per learner), staleness histogram, ...
    history: list[list[torch.Tensor]] = field(default_factory=list)  # per learner, per step
    noise: list[dict[str, Any]] = field(default_factory=list)  # B_simple, when measured


def simulate(
    algo: str,
    learners: int,
    steps: int,
    make_model: Callable[[int], torch.nn.Module],
    make_optimizer: Callable[[torch.nn.Module], torch.optim.Optimizer],
    loss_fn: LossFn,
    speed: SpeedModel | None = None,
    options: Mapping[str, Any] | None = None,
    grad_clip: float = 0.0,
    eval_fn: EvalFn | None = None,
    eval_every: int = 0,
    epoch_steps: float = 0.0,
    keep_history: bool = False,
    noise: NoiseProbe | None = None,
) -> Result:
    """Simulate ``learners`` learners of ``algo`` (an ``--algo`` name with its ``options``),
    ``steps`` steps each. ``make_model(i)`` builds learner i's model, ``loss_fn(i, k, model)``
    its loss on its shard at step k; ``epoch_steps`` (learner steps in one epoch of the corpus)
    turns steps into epochs in the records; ``noise`` measures the gradient noise scale."""
    if learners < 1 or steps < 0:
        raise AsrdistError(f"simulate: {learners} learners, {steps} steps: need at least one "
                           "learner and no negative steps")
    speed = speed or SpeedModel()
    missing = [r for r in sorted(speed.slow) if r >= learners]
    if missing:  # as CommonOptions.check_world refuses it for real learners
        raise AsrdistError(f"--slow-learner {missing[0]}: there is no learner {missing[0]} "
                           f"among {learners} (ranks 0..{learners - 1})")
    try:
        opts = registry.make_options(algo, dict(options or {}))
    except ValueError as exc:
        raise AsrdistError(str(exc)) from None
    sims = []
    for i in range(learners):
        model = make_model(i)
        sims.append(SimLearner(i, model, make_optimizer(model)))
    world = World(sims, speed, loss_fn, grad_clip, keep_history)
    records: list[dict[str, float]] = []
    evaluator = _Evaluator(world, eval_fn, eval_every, epoch_steps, records)
    world.on_step = evaluator.maybe
    t0 = time.perf_counter()
    ring = spawn(world, algo, opts, steps)
    if noise is not None:
        world.on_step = noise.watch(world, loss_fn, world.on_step)
    world.clock.run()
    if ring is not None:
        ring.leave()
    before = [flat_weights(s.model) for s in sims]
    average_into([float_tensors(s.model) for s in sims])
    if eval_fn is not None and (not records or records[-1]["steps"] < steps):
        evaluator.record()
    summary = world.summary()
    summary["host_s"] = time.perf_counter() - t0
    if ring is not None:
        summary["exchanges"] = ring.exchanges
    return Result(records, before, flat_weights(sims[0].model), summary,
                  [s.history for s in sims], noise.records if noise is not None else [])


class _Evaluator:
    """Evaluates the learners' mean every ``every`` steps per learner."""

    def __init__(self, world: World, eval_fn: EvalFn | None, every: int, epoch_steps: float,
                 records: list[dict[str, float]]) -> None:
        self.world, self.eval_fn, self.every = world, eval_fn, every
        self.epoch_steps, self.records = epoch_steps, records
        self.next = every * world.n
        self._model: torch.nn.Module | None = None

    def maybe(self) -> None:
        if self.eval_fn is None or self.every <= 0 or self.world.total_steps() < self.next:
            return
        self.next += self.every * self.world.n
        self.record()

    def record(self) -> None:
        assert self.eval_fn is not None
        world = self.world
        if self._model is None:
            self._model = copy.deepcopy(world.learners[0].model)
        mean = self._model
        with torch.no_grad():
            for t, *others in zip(float_tensors(mean),
                                  *[float_tensors(s.model) for s in world.learners], strict=True):
                t.copy_(torch.stack([o.detach() for o in others]).mean(0))
        total = world.total_steps()
        row = {"time_s": world.clock.now, "steps": total / world.n,
               "dist_to_mean": world.distance_to_mean()}
        if self.epoch_steps > 0:
            row["epochs"] = total / self.epoch_steps
        mean.eval()
        with torch.no_grad():
            row.update(self.eval_fn(mean))
        self.records.append(row)
