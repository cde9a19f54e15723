"""Straggler resilience: N learners, one made FACTOR times slower (``--slow-learner``).

For every strategy, the other learners' steps/s with the straggler, relative to the same run
without one. The papers expect ADPSGD to keep most of its speed (its communication thread
serves exchanges while the slow learner computes) and SSGD to fall to the straggler's pace.
hadpsgd runs with real super-learners: ``--learners-per-node`` consecutive ranks form a node
(4 learners = 2 nodes of 2 by default), so the straggler's node partner is held to its pace
by the node's synchronous allreduce while the other node keeps ADPSGD's pace. Every strategy
runs with the same number of learners, so the rows compare.

Each learner is a real process (gloo on 127.0.0.1, one compute thread each) training an MLP
with the trainer's own step (asrdist.parallel.strategy.train_step).

    .venv/bin/python -m bench.straggler [--steps 60] [--factor 3] [--learners 4]
        [--learners-per-node 2] [--publish]   # writes its file in bench/results
"""

from __future__ import annotations

import argparse
import os
import time

import torch

from asrdist.parallel.registry import make_strategy
from asrdist.parallel.strategy import train_step
from asrdist.testing.learners import launch
from bench.harness import presets
from bench.results import publish, publish_option


def _learner(rank: int, n: int, algo: str, options: dict, steps: int, slow: str | None,
             width: int, sim_ms: float) -> float:
    """Train ``steps`` steps; return this learner's steps/s after a warm-up of 5 steps."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(width, width), torch.nn.ReLU(),
                                torch.nn.Linear(width, width), torch.nn.ReLU(),
                                torch.nn.Linear(width, 32))
    strategy = make_strategy(algo, slow_learner=slow, distance_every=0, **options)
    wrapped = strategy.wrap_model(model)
    opt = torch.optim.SGD(wrapped.parameters(), lr=0.01, momentum=0.9)
    g = torch.Generator().manual_seed(rank)
    x, y = torch.randn(256, width, generator=g), torch.randint(0, 32, (256,), generator=g)
    def loss_fn(m: torch.nn.Module) -> torch.Tensor:
        if sim_ms:
            time.sleep(sim_ms / 1000)  # an accelerator's compute: the CPU stays free
        return torch.nn.functional.cross_entropy(m(x), y)

    t_warm = 0.0
    for step in range(steps):
        if step == 5:
            t_warm = time.perf_counter()
        train_step(strategy, wrapped, opt, step, loss_fn)
    rate = (steps - 5) / (time.perf_counter() - t_warm)
    strategy.finalize(wrapped)
    strategy.close()
    return rate


def plural(word: str, items: list) -> str:
    return word if len(items) == 1 else word + "s"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--factor", type=float, default=3.0)
    ap.add_argument("--learners", type=int, default=4,
                    help="learner processes, the same for every strategy")
    ap.add_argument("--learners-per-node", type=int, default=2,
                    help="hadpsgd: learners per super-learner (consecutive ranks), at least 2; "
                    "must divide --learners into at least 2 super-learners")
    ap.add_argument("--slow-rank", type=int, default=1)
    ap.add_argument("--width", type=int, default=512)
    ap.add_argument("--sim-compute-ms", type=float, default=0.0,
                    help="add this much simulated (sleeping, accelerator-like) compute per step; "
                    "on a CPU-starved machine it keeps the learners from competing for cores")
    publish_option(ap, __file__)
    args = ap.parse_args()
    n, per_node = args.learners, args.learners_per_node
    if n < 2 or not 0 <= args.slow_rank < n:
        ap.error("need --learners >= 2 and 0 <= --slow-rank < --learners")
    if per_node < 2 or n % per_node or n // per_node < 2:  # 1 per node: adpsgd by another name
        ap.error(f"--learners-per-node {per_node} must be at least 2 and divide --learners {n} "
                 "into at least 2 super-learners")
    torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=0.0)  # import dynamo once
    others = [r for r in range(n) if r != args.slow_rank]
    node_of = [r // per_node for r in range(n)]
    t0, load = time.perf_counter(), os.getloadavg()
    rows = []
    for algo, options in presets(per_node):
        base = launch(_learner, n, algo, options, args.steps, None, args.width,
                      args.sim_compute_ms)
        slow = launch(_learner, n, algo, options, args.steps,
                      f"{args.slow_rank}:{args.factor:g}", args.width, args.sim_compute_ms)
        b = sum(base[r] for r in others) / len(others)
        s = sum(slow[r] for r in others) / len(others)
        rows.append((algo, b, s, slow))
        print(f"{algo:14s} other learners {b:6.2f} -> {s:6.2f} steps/s ({s / b:.2f}); "
              f"per learner with straggler {' / '.join(f'{x:.2f}' for x in slow)}", flush=True)
    wall = time.perf_counter() - t0
    cmd = (f".venv/bin/python -m bench.straggler --steps {args.steps} --factor {args.factor:g} "
           f"--learners {n} --learners-per-node {per_node} --slow-rank {args.slow_rank} "
           f"--width {args.width} --sim-compute-ms {args.sim_compute_ms:g}")
    partners = [r for r in others if node_of[r] == node_of[args.slow_rank]]
    nodes = " + ".join("{" + ", ".join(map(str, range(k, k + per_node))) + "}"
                       for k in range(0, n, per_node))
    lines = [
        "## Straggler resilience", "",
        f"{n} learners (CPU, gloo, 1 thread each), learner {args.slow_rank} made "
        f"{args.factor:g}x slower with `--slow-learner {args.slow_rank}:{args.factor:g}`; "
        f"MLP {args.width}-{args.width}-{args.width}-32, batch 256, {args.steps} steps per "
        f"learner, {args.sim_compute_ms:g} ms of simulated compute per step, rates after 5 "
        "warm-up steps. Every strategy runs the same "
        f"{n} learners; hadpsgd has {n // per_node} super-learners of {per_node} "
        f"(`--learners-per-node {per_node}`: nodes {nodes}), so the straggler's node "
        f"{plural('partner', partners)} ({', '.join(map(str, partners))}) "
        f"{'allreduce' if len(partners) > 1 else 'allreduces'} with it every step. "
        "Others = every learner but the straggler; ratio = their mean steps/s with the "
        "straggler / without it. "
        f"Wall time of the whole run {wall:.0f} s on {os.cpu_count()} CPU cores, 1-minute load "
        f"average {load[0]:.1f} at the start and {os.getloadavg()[0]:.1f} at the end (it counts "
        "other jobs too: where they share the machine, compare rows of one run, not absolute "
        "rates).", "",
        f"Command: `{cmd}`", "",
        "| strategy | others, no straggler (steps/s) | others, with straggler (steps/s) | ratio "
        f"| with straggler, learners {' / '.join(map(str, range(n)))} (steps/s) |",
        "|---|---|---|---|---|",
    ]
    for algo, b, s, slow in rows:
        lines.append(f"| {algo} | {b:.2f} | {s:.2f} | {s / b:.2f} | "
                     f"{' / '.join(f'{x:.2f}' for x in slow)} |")
    publish(lines, args.publish)


if __name__ == "__main__":
    main()
