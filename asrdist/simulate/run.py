"""Run N simulated learners of one strategy and report what the studies need.

Each learner runs the trainer's own loop with its strategy built from the registry, as a real
learner does, on the simulator's transport (:mod:`asrdist.simulate.transport`); nothing here
depends on which strategy it is. The run's time includes the strategy's end (its final
average), as a real run's does.

The learners' mean is evaluated every ``eval_every`` steps per learner (counted over all
learners that have not left, so asynchronous learners at different steps are fine): held-out
figures from ``eval_fn``, against simulated wall time, steps and epochs, with the distance of
the learners to their mean. The last record is always of the exported average, after the
strategy's end (its in-flight merges and final average), marked ``final`` as asrdist-train
marks its own: the learners' mean before that end is not what a real run exports. At the end:
the staleness histogram, each learner's time spent waiting, what learner 0's strategy reports
of itself (what it resolved its options to: a block momentum from the number of learners, an
averaging period from frames) and the exported average.

Lost learners (``lost``: rank -> fraction of its steps, a scenario's ``lost:RANK@FRACTION``)
do what a killed process does: learner RANK takes ``max(1, int(FRACTION * steps))`` steps and
is gone (:meth:`asrdist.simulate.world.World.depart`). A strategy the registry marks
``elastic`` goes on as its processes do under ``--elastic``: the survivors drop it (and a
hierarchical node's other learners leave when their node's collective fails), nobody waits for it,
the records' mean and the export are the survivors'. Any other ends the run at the loss, as its
processes' job ends: ``summary["failed"]`` says where, there is no ``final`` record and
:attr:`Result.final` is empty (there is no exported model).
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
from asrdist.parallel.rules.weights import flat_weights
from asrdist.parallel.strategy import Learner, Strategy, train_step
from asrdist.simulate.batched import Batcher
from asrdist.simulate.coroutine import Coroutine
from asrdist.simulate.noise import NoiseProbe
from asrdist.simulate.speed import BACKWARD_SHARE, SpeedModel
from asrdist.simulate.transport import LostPeer, SimTransport
from asrdist.simulate.world import EvalFn, LossFn, SimLearner, World, float_tensors


@dataclass
class Result:
    records: list[dict[str, Any]]  # one per evaluation; the last of the exported average
    learners: list[torch.Tensor]  # each learner's flat weights at the end of its steps
    # (before the strategy's end: in-flight merges and the final average)
    final: torch.Tensor  # the exported average's flat weights
    summary: dict[str, Any]  # time_s, wait_s (per learner), staleness histogram, ...
    # (see World.summary)
    history: list[list[torch.Tensor]] = field(default_factory=list)  # per learner, per step
    start: list[torch.Tensor] = field(default_factory=list)  # each learner's, once wrapped
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
    together: int | None = None,
    eval_start: bool = False,
    lost: Mapping[int, float] | None = None,
) -> Result:
    """Simulate ``learners`` learners of ``algo`` (an ``--algo`` name with its ``options``),
    ``steps`` steps each. ``make_model(i)`` builds learner i's model, ``make_optimizer`` its
    optimizer over the module its strategy wraps, ``loss_fn(i, k, model)`` its loss on its
    shard at step k; ``epoch_steps`` (learner steps in one epoch of the corpus) turns steps
    into epochs in the records, ``eval_start`` adds a record of the weights the learners start
    from; ``noise`` measures the gradient noise scale. With a
    :class:`~asrdist.simulate.batched.FrameLoss`, up to ``together`` learners' forward and
    backward passes are computed as one (:mod:`asrdist.simulate.batched`); 0: each learner's
    on its own; None: 64 on a GPU; on a CPU, 8 for more than 16 learners, else 0 (one
    learner's step already keeps a core busy, so together is no faster there; but one at a
    time, every computing learner's forward graph is held through its compute time, and
    together keeps a fraction of that memory: bench/results/sim_cost.md)."""
    if learners < 1 or steps < 0 or (together or 0) < 0:
        raise AsrdistError(f"simulate: {learners} learners, {steps} steps, {together} together: "
                           "need at least one learner and no negative counts")
    speed = speed or SpeedModel()
    missing = [r for r in sorted(speed.slow) if r >= learners]
    if missing:  # as CommonOptions.check_world refuses it for real learners
        raise AsrdistError(f"--slow-learner {missing[0]}: there is no learner {missing[0]} "
                           f"among {learners} (ranks 0..{learners - 1})")
    lost = dict(lost or {})
    wrong = [r for r, f in sorted(lost.items()) if r >= learners or not 0 < f < 1]
    if wrong:
        raise AsrdistError(f"lost learner {wrong[0]} at {lost[wrong[0]]:g} of its steps: need "
                           f"a learner among {learners} and a fraction in (0, 1)")
    stops = {r: max(1, int(f * steps)) for r, f in lost.items()}
    late = [r for r, stop in sorted(stops.items()) if stop >= steps]
    if late:
        raise AsrdistError(f"lost learner {late[0]} at {lost[late[0]]:g} of its steps: a run of "
                           f"{steps} steps a learner ends before it is lost")
    try:
        spec = registry.spec(algo)
        opts = registry.make_options(algo, dict(options or {}))
    except ValueError as exc:
        raise AsrdistError(str(exc)) from None
    if learners > 1 and not spec.multi_learner:  # as the trainer refuses it
        raise AsrdistError(f"--algo {algo} trains one learner, not {learners}: choose a "
                           "distributed --algo")
    sims = [SimLearner(i, make_model(i)) for i in range(learners)]
    world = World(sims, speed, loss_fn, keep_history)
    world.elastic = spec.elastic and bool(stops)
    if together is None:
        together = 64 if _on_gpu(sims[0].model) else 8 if learners > 16 else 0
    batcher = Batcher(loss_fn, together) if together > 0 else None
    records: list[dict[str, Any]] = []
    evaluator = _Evaluator(world, eval_fn, eval_every, epoch_steps, steps, records)
    world.on_step = evaluator.maybe
    start: list[torch.Tensor] = [torch.empty(0)] * learners
    before: list[torch.Tensor] = [torch.empty(0)] * learners
    reported: list[dict[str, Any]] = [{}] * learners
    t0 = time.perf_counter()
    turns = []
    for i in range(learners):
        comm = SimTransport(world, i)
        strategy = spec.make(Learner(i, learners, transport=comm), opts)
        learn = _Learn(world, comm, strategy, steps, make_optimizer, grad_clip, start, before,
                       reported, batcher, stops.get(i))
        comm.turn = Coroutine(learn, f"asrdist-sim-{i}")
        turns.append(comm.turn)
        world.clock.spawn(i, comm.turn.process())
    if noise is not None:
        world.on_step = noise.watch(world, loss_fn, world.on_step)
    if eval_fn is not None and eval_start:
        evaluator.record()
    try:
        world.clock.run()
    finally:
        for turn in turns:
            turn.cancel()
    if eval_fn is not None and world.failed is None:
        evaluator.record(exported=True)
    summary = world.summary()
    first = world.survivors()[0] if world.failed is None else 0
    summary["strategy"] = reported[first]
    summary["host_s"] = time.perf_counter() - t0
    final = flat_weights(sims[first].model) if world.failed is None else torch.empty(0)
    return Result(records, before, final, summary,
                  [s.history for s in sims], start,
                  noise.records if noise is not None else [])


def _on_gpu(model: torch.nn.Module) -> bool:
    return any(p.device.type != "cpu" for p in model.parameters())


@dataclass
class _Learn:
    """One simulated learner's program: the trainer's loop (``train_step``, so the strategy's
    hooks run in the contract's order), with the speed model's compute time spent after the
    forward pass starts (its result is needed when that time has passed: the batcher may
    compute it then, with other learners') and its update time after the optimizer step;
    then the strategy's end and what the strategy reports of itself."""

    world: World
    comm: SimTransport
    strategy: Strategy
    steps: int
    make_optimizer: Callable[[torch.nn.Module], torch.optim.Optimizer]
    grad_clip: float
    start: list[torch.Tensor]  # each learner's weights once its strategy wrapped the model
    before: list[torch.Tensor]  # each learner's weights at the end of its steps
    reported: list[dict[str, Any]]  # each learner's strategy's metrics() after its end
    batcher: Batcher | None  # computes learners together; None: each on its own
    stop: int | None = None  # lost after this many steps (None: never)

    def __call__(self, turn: Coroutine) -> None:
        world, comm, i = self.world, self.comm, self.comm.rank
        model = world.learners[i].model
        wrapped = self.strategy.wrap_model(model)
        self.start[i] = flat_weights(model)
        optimizer = self.make_optimizer(wrapped)
        optimizer.register_step_post_hook(lambda *_: comm.sleep(world.speed.update_s))
        for k in range(self.steps):
            if k == self.stop:  # its process is killed: nothing more of it, ever
                self.before[i] = flat_weights(model)
                world.depart(i, f"lost after {k} of its {self.steps} steps")
                return

            def loss_fn(m: torch.nn.Module, k: int = k) -> torch.Tensor:
                if self.batcher is None:
                    loss = world.loss_fn(i, k, m)
                    self._compute(k)
                    return loss
                pending = self.batcher.submit(i, k, m)  # its weights and batch, from now
                self._compute(k)
                return pending.loss()

            try:
                train_step(self.strategy, wrapped, optimizer, k, loss_fn, self.grad_clip)
            except LostPeer as exc:  # elastic: a node collective with a lost learner failed
                self.before[i] = flat_weights(model)
                world.depart(i, f"left at step {k}: {exc}")
                return
            world.end_step(i)
        self.before[i] = flat_weights(model)
        world.steps_done(i)
        self.strategy.finalize(wrapped)
        self.reported[i] = self.strategy.metrics()
        self.strategy.close()

    def _compute(self, k: int) -> None:
        """Spend step ``k``'s forward and backward; its backward's length is what a gradient
        mean may overlap."""
        i, world = self.comm.rank, self.world
        seconds = world.speed.step_s(i, k)
        world.backward_s[i] = BACKWARD_SHARE * seconds
        self.comm.sleep(seconds)


class _Evaluator:
    """Evaluates the learners' mean every ``every`` steps per learner, but not once all steps
    are taken: the exported average's record follows the strategy's end. Steps per learner
    are the survivors' mean (a lost learner's missing steps would otherwise hold the last
    evaluations back until the end)."""

    def __init__(self, world: World, eval_fn: EvalFn | None, every: int, epoch_steps: float,
                 steps: int, records: list[dict[str, Any]]) -> None:
        self.world, self.eval_fn, self.every = world, eval_fn, every
        self.epoch_steps, self.records = epoch_steps, records
        self.next = every  # steps per learner
        self.last = steps
        self._model: torch.nn.Module | None = None

    def maybe(self) -> None:
        world = self.world
        alive = world.survivors()
        done = sum(world.learners[r].steps for r in alive)
        if self.eval_fn is None or self.every <= 0 or done < self.next * len(alive) \
                or done >= self.last * len(alive):
            return
        self.next += self.every
        self.record()

    def record(self, exported: bool = False) -> None:
        """A record of the learners' mean (of those that have not left), or with ``exported``
        of the first survivor's weights (the exported average, once the strategy has ended),
        marked ``final``."""
        assert self.eval_fn is not None
        world = self.world
        if self._model is None:
            self._model = copy.deepcopy(world.learners[0].model)
        model = self._model
        alive = [world.learners[r] for r in world.survivors()]
        sources = alive[:1] if exported else alive
        with torch.no_grad():
            for t, *others in zip(float_tensors(model),
                                  *[float_tensors(s.model) for s in sources], strict=True):
                t.copy_(torch.stack([o.detach() for o in others]).mean(0))
        total = world.total_steps()
        row: dict[str, Any] = {"time_s": world.clock.now,
                               "steps": sum(s.steps for s in alive) / len(alive),
                               "dist_to_mean": world.distance_to_mean()}
        if self.epoch_steps > 0:
            row["epochs"] = total / self.epoch_steps
        model.eval()
        with torch.no_grad():
            row.update(self.eval_fn(model))
        if exported:
            row["final"] = True
        self.records.append(row)
