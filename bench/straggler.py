"""Straggler resilience: 2 learners, one made FACTOR times slower (``--slow-learner``).

For every strategy, the fast learner's steps/s with the straggler, relative to the same run
without one. The papers expect ADPSGD to keep most of its speed (its communication thread
serves exchanges while the slow learner computes) and SSGD to fall to the straggler's pace.

Each learner is a real process (gloo on 127.0.0.1, one compute thread each) training an MLP
with the trainer's own step (asrdist.parallel.strategy.train_step).

    .venv/bin/python -m bench.straggler [--steps 60] [--factor 3]
        [--out bench/RESULTS.md]   # replaces its section there
"""

from __future__ import annotations

import argparse
import multiprocessing
import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist

from asrdist.parallel.launch import free_port
from asrdist.parallel.registry import make_strategy
from asrdist.parallel.strategy import train_step
from bench.results import publish

STRATEGIES: list[tuple[str, dict[str, Any]]] = [
    ("ssgd", {}),
    ("adpsgd-fixed", {}),
    ("adpsgd-random", {}),
    ("adpsgd-delay1", {}),
    ("hadpsgd", {"learners_per_node": 1, "hadpsgd_variant": "random"}),
    ("ma", {"avg_period": 8}),
]


def _child(fn: Callable[..., Any], rank: int, n: int, port: int, q: Any, args: tuple,
           addr: str, setup: Callable[[int], None] | None) -> None:
    torch.set_num_threads(1)
    if setup is not None:
        setup(rank)
    dist.init_process_group("gloo", init_method=f"tcp://{addr}:{port}", rank=rank,
                            world_size=n, timeout=timedelta(seconds=120))
    q.put((rank, fn(rank, n, *args)))
    dist.destroy_process_group()


def launch(fn: Callable[..., Any], n: int, *args: Any, addr: str = "127.0.0.1",
           setup: Callable[[int], None] | None = None) -> list[Any]:
    """Run ``fn(rank, n, *args)`` in ``n`` forked learner processes; their results by rank.

    ``setup(rank)`` runs in each child before the rendezvous at ``addr`` (e.g. entering a
    network namespace)."""
    ctx = multiprocessing.get_context("fork")
    q = ctx.Queue()
    port = free_port()
    procs = [ctx.Process(target=_child, args=(fn, r, n, port, q, args, addr, setup))
             for r in range(n)]
    for p in procs:
        p.start()
    out = dict(q.get(timeout=600) for _ in procs)
    for p in procs:
        p.join()
        if p.exitcode != 0:
            raise RuntimeError(f"learner exited {p.exitcode}")
    return [out[r] for r in range(n)]


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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--factor", type=float, default=3.0)
    ap.add_argument("--slow-rank", type=int, default=1)
    ap.add_argument("--width", type=int, default=512)
    ap.add_argument("--sim-compute-ms", type=float, default=0.0,
                    help="add this much simulated (sleeping, accelerator-like) compute per step; "
                    "on a CPU-starved machine it keeps the learners from competing for cores")
    ap.add_argument("--out", help="append the results section to this markdown file")
    args = ap.parse_args()
    torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=0.0)  # import dynamo once
    fast = 1 - args.slow_rank
    rows = []
    for algo, options in STRATEGIES:
        base = launch(_learner, 2, algo, options, args.steps, None, args.width,
                      args.sim_compute_ms)
        slow = launch(_learner, 2, algo, options, args.steps,
                      f"{args.slow_rank}:{args.factor:g}", args.width, args.sim_compute_ms)
        rows.append((algo, base[fast], slow[fast], slow[args.slow_rank]))
        print(f"{algo:14s} fast learner {base[fast]:6.2f} -> {slow[fast]:6.2f} steps/s "
              f"({slow[fast] / base[fast]:.2f}); straggler {slow[args.slow_rank]:.2f}",
              flush=True)
    cmd = (f".venv/bin/python -m bench.straggler --steps {args.steps} --factor {args.factor:g} "
           f"--slow-rank {args.slow_rank} --width {args.width} "
           f"--sim-compute-ms {args.sim_compute_ms:g}")
    lines = [
        "## Straggler resilience", "",
        f"2 learners (CPU, gloo, 1 thread each), learner {args.slow_rank} made "
        f"{args.factor:g}x slower with `--slow-learner {args.slow_rank}:{args.factor:g}`; "
        f"MLP {args.width}-{args.width}-{args.width}-32, batch 256, {args.steps} steps per "
        f"learner, {args.sim_compute_ms:g} ms of simulated compute per step, rates after 5 "
        "warm-up steps. Ratio = the fast learner's steps/s with the "
        "straggler / without it.", "",
        f"Command: `{cmd}`", "",
        "| strategy | fast learner, no straggler (steps/s) | with straggler (steps/s) | ratio "
        "| straggler (steps/s) |",
        "|---|---|---|---|---|",
    ]
    for algo, b, s, st in rows:
        lines.append(f"| {algo} | {b:.2f} | {s:.2f} | {s / b:.2f} | {st:.2f} |")
    publish(lines, args.out)


if __name__ == "__main__":
    main()
