"""One simulated training run on a corpus in memory: the model, the optimizer, the data shards
and the held-out evaluation that the CLI and the studies share."""

from __future__ import annotations

import copy
import dataclasses
import math
from dataclasses import dataclass, field, fields
from typing import Any

import torch

from asrdist.data.options import DataOptions
from asrdist.errors import AsrdistError
from asrdist.models.build import ModelConfig, build_model
from asrdist.optim.build import OptimizerOptions, build_optimizer
from asrdist.options import Options, component, paths
from asrdist.parallel import registry
from asrdist.simulate.batched import FrameLoss
from asrdist.simulate.corpus import ChunkPool, heldout_figures
from asrdist.simulate.noise import NoiseProbe
from asrdist.simulate.run import Result, simulate
from asrdist.simulate.speed import SpeedModel
from asrdist.train.config import FIELDS
from asrdist.train.schedule import ScheduleOptions, make_schedule


def _as_train(name: str, kind: type | None = None) -> Any:
    """A field declaring asrdist-train's option ``name`` as asrdist-train declares it (default,
    help, check), its default as ``kind`` where given."""
    f = FIELDS[name]
    return field(default=kind(f.default) if kind else f.default, metadata=f.metadata)


@dataclass(frozen=True, kw_only=True)
class RunSpec(Options):
    """A simulated run, composed of asrdist-train's component options objects (the model's,
    the data reading's, the learning-rate schedule's, the optimizer's) and its options, so its
    defaults are asrdist-train's by construction (tests/simulate/test_spec_defaults.py); the
    studies state the values they run (bench/studies/common.py). The chunk pool is read with
    ``reading``'s chunk length and normalisation by those who load it (asrdist-simulate,
    asrdist-compare): a run takes its batch from ``reading``, its chunks from the pool."""

    algo: str  # an --algo
    learners: int = 16
    epochs: float = _as_train("epochs", float)
    model: ModelConfig = component(ModelConfig)
    reading: DataOptions = component(DataOptions)
    schedule: ScheduleOptions = component(ScheduleOptions)
    optim: OptimizerOptions = component(OptimizerOptions)
    grad_clip: float = _as_train("grad_clip")
    seed: int = _as_train("seed")
    options: dict[str, Any] = field(default_factory=dict)  # the strategy's own
    evals: int = 4  # held-out evaluations over the run (the last of the exported average)
    # also evaluate the weights the learners start from (a record at step 0); off for the
    # studies, whose curves count one record per evaluation over the run
    eval_start: bool = False

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.optim.optimizer != "sgd":
            raise AsrdistError(f"--optimizer {self.optim.optimizer}: the simulator runs sgd")

    @property
    def batch(self) -> int:
        """Chunks per learner per step."""
        return self.reading.batch_size

    def global_batch(self) -> int:
        return self.learners * self.batch

    def replace(self, **changes: Any) -> RunSpec:
        """This spec with ``changes``, a component's option by its public name too
        (``batch_size=64``, ``lr=0.2``: asrdist-train's flags)."""
        kinds = {f.name: f.metadata.get("component") for f in fields(self)}
        own = {n: v for n, v in changes.items() if n in kinds}
        for name, value in own.items():  # model="dnn" is not the model's type: model=ModelConfig
            if kinds[name] is not None and not isinstance(value, kinds[name]):
                raise TypeError(f"RunSpec.{name} is a {kinds[name].__name__}, got {value!r}")
        where = paths(self)
        parts: dict[str, dict[str, Any]] = {}
        for name, value in changes.items():
            if name in own:
                continue
            if name not in where or len(where[name][0]) != 2:
                raise TypeError(f"RunSpec has no option {name!r}")
            (part, attr), _ = where[name]
            parts.setdefault(part, {})[attr] = value
        for part, values in parts.items():
            own[part] = dataclasses.replace(own.get(part, getattr(self, part)), **values)
        return dataclasses.replace(self, **own)


def run_steps(pool: ChunkPool, spec: RunSpec) -> tuple[int, int]:
    """``spec``'s steps per epoch of ``pool`` and its steps in all (per learner)."""
    per_epoch = pool.steps_per_epoch(spec.global_batch())
    return per_epoch, max(1, round(spec.epochs * per_epoch))


def run(pool: ChunkPool, spec: RunSpec, speed: SpeedModel | None = None,
        noise_every: int = 0, lost: dict[int, float] | None = None) -> Result:
    """Simulate ``spec`` on ``pool``: every learner starts from the same weights (seeded as a
    real run's learners are), reads its slice of each global batch, and the learners' mean is
    evaluated on the held-out chunks ``spec.evals`` times; with ``noise_every``, B_simple is
    measured every that many steps per learner (``Result.noise``); ``lost``: learners lost
    after that fraction of their steps (:func:`asrdist.simulate.run.simulate`)."""
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
        eval_start=spec.eval_start, lost=lost,
    )


def _optimizer(spec: RunSpec, model: torch.nn.Module, per_epoch: int,
               steps: int) -> torch.optim.Optimizer:
    """One learner's optimizer, built as asrdist-train's learners build theirs (from the
    optimizer's options object); each step's rate is set before the step from the learner's
    own step count by the schedule, as asrdist-train's learners set it from theirs."""
    optimizer = build_optimizer(spec.optim, model, spec.schedule.lr)
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
