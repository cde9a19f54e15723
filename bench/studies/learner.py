"""One learner of the network and straggler studies: a synthetic task whose compute stands in
for an accelerator's by sleeping.

The model is an MLP (``layers`` x ``width``) learning a fixed random teacher's labels, so the
held-out cross-entropy falls as it trains. Before every linear layer sits a :class:`SimCompute`
that sleeps in the forward and in the backward pass: ``sim_ms`` per step, a third forward and
two thirds backward, spread over the layers, as a GPU's kernels would be. So DDP's bucketed
allreduce overlaps the backward sleeps of the earlier layers as it would overlap a GPU's
backward, while the CPU (2 cores shared by everything here) stays free for the communication.
A slowed learner sleeps ``factor`` times as long.

Each learner first times ``calib_steps`` steps of its model alone (no strategy, no
communication): their median is its compute per step. Then all meet at a barrier and train
``steps`` steps through the trainer's own step (:func:`asrdist.parallel.strategy.train_step`).
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.distributed as dist

from asrdist.parallel.registry import make_strategy
from asrdist.parallel.rules.weights import unwrap
from asrdist.parallel.strategy import Strategy, train_step

CLASSES = 32
POOL = 256  # batches of training data per learner, reused cyclically


@dataclass(frozen=True)
class Config:
    """One run of one strategy; every learner gets the same one."""

    algo: str
    steps: int
    options: dict[str, Any] = field(default_factory=dict)
    width: int = 1024
    layers: int = 4
    batch: int = 16
    sim_ms: float = 100.0  # simulated accelerator time per step of a learner at full speed
    slow: dict[int, float] = field(default_factory=dict)  # rank -> slow-down factor
    eval_every: int = 0  # learner 0 evaluates its own weights every so many steps (0: never)
    calib_steps: int = 6
    lr: float = 0.02
    input_rank: int = 0  # inputs drawn in a subspace of this many dimensions (0: all of width)


class SimCompute(torch.autograd.Function):
    """Identity that sleeps ``fwd_s`` in the forward and ``bwd_s`` in the backward pass."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, fwd_s: float, bwd_s: float) -> torch.Tensor:
        time.sleep(fwd_s)
        ctx.bwd_s = bwd_s
        return x.view_as(x)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None, None]:
        time.sleep(ctx.bwd_s)
        return grad, None, None


class SimLayer(torch.nn.Module):
    """A linear layer followed by simulated compute (after, not before: the first layer's
    input needs no gradient, so a sleep there would never run in the backward pass)."""

    def __init__(self, n_in: int, n_out: int, fwd_s: float, bwd_s: float) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(n_in, n_out)
        self.fwd_s, self.bwd_s = fwd_s, bwd_s

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return SimCompute.apply(self.linear(x), self.fwd_s, self.bwd_s)


def make_model(cfg: Config, factor: float = 1.0) -> torch.nn.Module:
    """The student MLP (same initial weights on every learner)."""
    torch.manual_seed(0)
    per_layer = cfg.sim_ms * factor / 1000 / (cfg.layers + 1)
    sizes = [cfg.width] * (cfg.layers + 1) + [CLASSES]
    mods: list[torch.nn.Module] = []
    for i in range(len(sizes) - 1):
        mods.append(SimLayer(sizes[i], sizes[i + 1], per_layer / 3, per_layer * 2 / 3))
        if i < len(sizes) - 2:
            mods.append(torch.nn.ReLU())
    return torch.nn.Sequential(*mods)


def numel(cfg: Config) -> int:
    """Parameters of the model (what one exchange moves, as float32)."""
    return sum(p.numel() for p in make_model(cfg).parameters())


def task(width: int, count: int, seed: int,
         rank: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """``count`` inputs and a fixed linear teacher's labels for them (learnable in a few
    hundred steps, so the held-out cross-entropy shows progress within a short run). With
    ``rank`` > 0 the inputs lie in a fixed random subspace of that many dimensions: the same
    teacher, a problem of ``rank`` dimensions, learnt in far fewer samples."""
    teacher = torch.randn(width, CLASSES, generator=torch.Generator().manual_seed(1234))
    if rank <= 0:
        x = torch.randn(count, width, generator=torch.Generator().manual_seed(seed))
    else:
        basis = torch.randn(rank, width, generator=torch.Generator().manual_seed(4321))
        z = torch.randn(count, rank, generator=torch.Generator().manual_seed(seed))
        x = z @ basis / rank ** 0.5  # unit variance per input, as without a subspace
    return x, (x @ teacher).argmax(1)


def heldout_ce(model: torch.nn.Module, data: tuple[torch.Tensor, torch.Tensor]) -> float:
    """Cross-entropy of ``model`` on held-out data, without the simulated compute."""
    x, y = data
    with torch.no_grad():
        for m in unwrap(model).children():
            x = m.linear(x) if isinstance(m, SimLayer) else m(x)
        return float(torch.nn.functional.cross_entropy(x, y))


def _run_steps(strategy: Strategy, model: torch.nn.Module, cfg: Config, rank: int, steps: int,
               on_step: Any = None) -> list[float]:
    """Train ``steps`` steps; the seconds each took."""
    opt = torch.optim.SGD(model.parameters(), lr=cfg.lr, momentum=0.9)
    x, y = task(cfg.width, POOL * cfg.batch, seed=100 + rank, rank=cfg.input_rank)
    times = []
    for step in range(steps):
        i = (step % POOL) * cfg.batch
        xb, yb = x[i : i + cfg.batch], y[i : i + cfg.batch]
        t0 = time.perf_counter()
        train_step(strategy, model, opt, step,
                   lambda m, xb=xb, yb=yb: torch.nn.functional.cross_entropy(m(xb), yb))
        times.append(time.perf_counter() - t0)
        if on_step is not None:
            on_step(step + 1, model)
    return times


def run(rank: int, n: int, cfg: Config) -> dict[str, Any]:
    """One learner's run (torch.distributed already initialised); its figures."""
    factor = cfg.slow.get(rank, 1.0)
    alone = _run_steps(Strategy(), make_model(cfg, factor), cfg, rank, cfg.calib_steps + 1)
    compute_s = statistics.median(alone[1:])  # the first step warms up; median: load spikes
    strategy = make_strategy(cfg.algo, distance_every=0, **cfg.options)
    model = strategy.wrap_model(make_model(cfg, factor))
    heldout = task(cfg.width, 1024, seed=7, rank=cfg.input_rank)
    # learner 0's weights every eval_every steps, evaluated after the run: an evaluation
    # inside it would stall learner 0 (and whoever waits for it) and count as its step time
    snapshots: list[tuple[float, int, dict[str, torch.Tensor]]] = []
    ends: list[float] = []  # seconds from the common start to the end of each step
    dist.barrier()
    t_start = time.perf_counter()

    def snapshot(m: torch.nn.Module) -> dict[str, torch.Tensor]:
        return {k: v.detach().clone() for k, v in unwrap(m).state_dict().items()}

    def on_step(step: int, m: torch.nn.Module) -> None:
        ends.append(time.perf_counter() - t_start)
        if rank == 0 and cfg.eval_every and step % cfg.eval_every == 0:
            snapshots.append((time.perf_counter() - t_start, step, snapshot(m)))

    if rank == 0 and cfg.eval_every:
        snapshots.append((0.0, 0, snapshot(model)))
    times = _run_steps(strategy, model, cfg, rank, cfg.steps, on_step)
    t_done = time.perf_counter() - t_start
    metrics = strategy.metrics()
    strategy.finalize(model)
    t_final = time.perf_counter() - t_start
    final_ce = heldout_ce(model, heldout)
    probe = make_model(cfg)
    evals: list[tuple[float, int, float]] = []
    for t, step, weights in snapshots:
        probe.load_state_dict(weights)
        evals.append((t, step, heldout_ce(probe, heldout)))
    strategy.close()
    return {"compute_s": compute_s, "step_s": times, "ends": ends, "done_s": t_done,
            "final_s": t_final, "metrics": metrics, "evals": evals, "final_ce": final_ce,
            "factor": factor}
