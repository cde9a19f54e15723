"""One simulated training run on a corpus in memory: the model, the optimizer, the data shards
and the held-out evaluation that the CLI and the studies share."""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass, field
from typing import Any

import torch

from asrdist.models.build import ModelConfig, build_model
from asrdist.parallel import registry
from asrdist.simulate.batched import FrameLoss
from asrdist.simulate.corpus import ChunkPool, heldout_figures
from asrdist.simulate.noise import NoiseProbe
from asrdist.simulate.run import Result, simulate
from asrdist.simulate.speed import SpeedModel
from asrdist.train.schedule import ScheduleOptions, make_schedule


@dataclass(frozen=True)
class RunSpec:
    algo: str  # an --algo
    learners: int = 16
    batch: int = 16  # chunks per learner per step
    epochs: float = 1.0
    lr: float = 0.1
    momentum: float = 0.9
    grad_clip: float = 5.0
    model: ModelConfig = field(default_factory=lambda: ModelConfig(layers=1, units=64))
    options: dict[str, Any] = field(default_factory=dict)  # the strategy's own
    seed: int = 0
    evals: int = 4  # held-out evaluations over the run (the last of the exported average)
    nesterov: bool = False
    weight_decay: float = 0.0
    # the learning-rate rule asrdist-train follows (its lr replaces ``lr``); None: ``lr`` at
    # every step, unscaled
    schedule: ScheduleOptions | None = None
    # also evaluate the weights the learners start from (a record at step 0); off for the
    # studies, whose curves count one record per evaluation over the run
    eval_start: bool = False

    def global_batch(self) -> int:
        return self.learners * self.batch


def run_steps(pool: ChunkPool, spec: RunSpec) -> tuple[int, int]:
    """``spec``'s steps per epoch of ``pool`` and its steps in all (per learner)."""
    per_epoch = pool.steps_per_epoch(spec.global_batch())
    return per_epoch, max(1, round(spec.epochs * per_epoch))


def run(pool: ChunkPool, spec: RunSpec, speed: SpeedModel | None = None,
        noise_every: int = 0) -> Result:
    """Simulate ``spec`` on ``pool``: every learner starts from the same weights (seeded as a
    real run's learners are), reads its slice of each global batch, and the learners' mean is
    evaluated on the held-out chunks ``spec.evals`` times; with ``noise_every``, B_simple is
    measured every that many steps per learner (``Result.noise``)."""
    per_epoch, steps = run_steps(pool, spec)
    torch.manual_seed(spec.seed)
    init = build_model(spec.model, pool.input_dim, pool.num_pdfs)

    loss_fn = FrameLoss(lambda i, k: pool.batch(i, k, spec.learners, spec.batch, spec.seed))
    return simulate(
        spec.algo, spec.learners, steps,
        make_model=lambda i: copy.deepcopy(init),
        make_optimizer=lambda m: _optimizer(spec, m, per_epoch, steps),
        loss_fn=loss_fn, speed=speed, options=strategy_options(spec, pool),
        grad_clip=spec.grad_clip,
        eval_fn=lambda m: heldout_figures(m, pool.heldout),
        eval_every=max(1, steps // max(spec.evals, 1)), epoch_steps=per_epoch * spec.learners,
        noise=NoiseProbe(noise_every, spec.batch, per_epoch * spec.learners)
        if noise_every else None,
        eval_start=spec.eval_start,
    )


def _optimizer(spec: RunSpec, model: torch.nn.Module, per_epoch: int,
               steps: int) -> torch.optim.Optimizer:
    """One learner's SGD; under a schedule, each step's rate is set before the step from the
    learner's own step count, as asrdist-train's learners set it from theirs."""
    optimizer = torch.optim.SGD(model.parameters(), lr=spec.lr, momentum=spec.momentum,
                                nesterov=spec.nesterov and spec.momentum > 0,
                                weight_decay=spec.weight_decay)
    if spec.schedule is None:
        return optimizer
    epochs = max(1, math.ceil(steps / per_epoch))
    schedule = make_schedule(spec.schedule, spec.batch, [per_epoch] * epochs, spec.learners,
                             max_steps=steps)
    taken = [0]

    def set_rate(opt: torch.optim.Optimizer, args: object, kwargs: object) -> None:
        rate = schedule.lr_at(taken[0], taken[0] // per_epoch)
        for group in opt.param_groups:
            group["lr"] = rate
        taken[0] += 1

    optimizer.register_step_pre_hook(set_rate)
    return optimizer


def strategy_options(spec: RunSpec, pool: ChunkPool) -> dict[str, Any]:
    """The strategy's options, with the training values it takes (seed, batch, chunk) filled
    in from the run as asrdist-train does."""
    training = {"seed": spec.seed, "batch_size": spec.batch, "chunk_len": pool.chunk_len}
    taken = registry.algorithm_options(spec.algo)
    return {**{k: v for k, v in training.items() if k in taken}, **spec.options}
