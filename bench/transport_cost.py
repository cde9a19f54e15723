"""What the strategies' transports cost: real processes' steps/s per strategy, and the
simulator's host time per learner-step, on a model small enough that the communication and the
clock's own work dominate.

Every strategy talks to other learners through :mod:`asrdist.parallel.transport`; this bench
checks that the process path is no slower than the strategies calling torch.distributed
themselves, and what running each simulated learner as a thread-held coroutine costs, by
running the same measurements with asrdist imported from another checkout (``--baseline``,
e.g. ``git archive`` of the commit before the transport) beside this one, alternately.

- processes: ``--learners`` forked learners (gloo on 127.0.0.1, one thread each) train an MLP
  of ``--width`` with the trainer's ``train_step`` for ``--steps`` steps; steps/s of each
  learner after 10 warm-up steps, averaged over learners; hadpsgd in nodes of 2;
- simulator: ``--sim-learners`` learners of a one-layer model, ``--sim-steps`` steps; host
  microseconds per learner-step, the forward/backward of the tiny model included.

    .venv/bin/python -m bench.transport_cost [--baseline DIR] [--repeats 3]
        [--publish]   # writes bench/results/transport_cost.md
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PROCESS_ALGOS = ["ssgd", "ma", "bmuf", "adpsgd-fixed", "adpsgd-delay1", "hadpsgd"]
SIM_ALGOS = ["ssgd", "ma", "bmuf", "adpsgd-random", "hadpsgd"]
OPTIONS = {"ma": {"avg_period": 4}, "bmuf": {"avg_period": 4},
           "hadpsgd": {"learners_per_node": 2}}


def _learner(algo: str, rank: int, n: int, port: int, steps: int, width: int, out) -> None:
    """One learner process: the trainer's step on an MLP; puts its steps/s after warm-up."""
    from datetime import timedelta

    import torch
    import torch.distributed as dist

    from asrdist.parallel.registry import make_strategy
    from asrdist.parallel.strategy import Learner, train_step

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=n, timeout=timedelta(seconds=60))
    strategy = make_strategy(algo, Learner.current(), exchange_timeout=60.0, distance_every=0,
                             **OPTIONS.get(algo, {}))
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(width, width), torch.nn.Tanh(),
                                torch.nn.Linear(width, width))
    wrapped = strategy.wrap_model(model)
    opt = torch.optim.SGD(wrapped.parameters(), lr=0.01, momentum=0.9)
    x, y = torch.randn(32, width), torch.randn(32, width)
    t0 = cpu0 = 0.0
    for step in range(steps):
        if step == 10:
            t0, cpu0 = time.perf_counter(), time.thread_time()
        train_step(strategy, wrapped, opt, step,
                   lambda m: torch.nn.functional.mse_loss(m(x), y))
    cpu_us = 1e6 * (time.thread_time() - cpu0) / (steps - 10)
    rate = (steps - 10) / (time.perf_counter() - t0)
    strategy.finalize(wrapped)
    strategy.close()
    dist.destroy_process_group()
    out.put((rank, rate, cpu_us))


def _processes(algo: str, n: int, steps: int, width: int) -> tuple[float, float]:
    """Mean over learners of steps/s and of the compute thread's CPU microseconds per step."""
    import multiprocessing

    from asrdist.parallel.launch.rendezvous import free_port

    ctx = multiprocessing.get_context("fork")
    out = ctx.Queue()
    port = free_port()
    # the run secret the learners' signed store messages need, as a launcher hands it over
    # (by name: a --baseline checkout may predate asrdist.parallel.processes.secret)
    os.environ["ASRDIST_RUN_SECRET"] = secrets.token_hex(16)
    procs = [ctx.Process(target=_learner, args=(algo, r, n, port, steps, width, out))
             for r in range(n)]
    for p in procs:
        p.start()
    got = [out.get(timeout=600) for _ in procs]
    for p in procs:
        p.join()
    return statistics.mean(g[1] for g in got), statistics.mean(g[2] for g in got)


def _simulator(algo: str, n: int, steps: int) -> tuple[float, float] | None:
    """Host wall and CPU (all threads) microseconds per learner-step; None where that
    checkout cannot simulate ``algo``."""
    import torch

    from asrdist.errors import AsrdistError
    from asrdist.simulate.run import simulate

    torch.set_num_threads(1)

    def make_model(i: int) -> torch.nn.Module:
        torch.manual_seed(0)
        return torch.nn.Linear(16, 16)

    data = torch.randn(8, 16), torch.randn(8, 16)
    cpu0 = time.process_time()
    try:
        res = simulate(algo, n, steps, make_model,
                       lambda m: torch.optim.SGD(m.parameters(), lr=0.01, momentum=0.9),
                       lambda i, k, m: torch.nn.functional.mse_loss(m(data[0]), data[1]),
                       options=OPTIONS.get(algo, {}))
    except AsrdistError:  # a strategy that checkout cannot simulate
        return None
    cpu = time.process_time() - cpu0
    return 1e6 * res.summary["host_s"] / (n * steps), 1e6 * cpu / (n * steps)


def _one(args: argparse.Namespace) -> dict:
    """The measurements of one checkout (asrdist from PYTHONPATH)."""
    import torch

    from asrdist.parallel import registry

    registry.specs()  # every strategy module imported once, before forking
    torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=0.0)  # imports torch._dynamo
    _simulator("ma", 2, 2)  # and whatever a first simulated run imports
    out: dict = {"processes": {}, "simulator": {}}
    for algo in _chosen(PROCESS_ALGOS, args):
        out["processes"][algo] = _processes(algo, args.learners, args.steps, args.width)
    for algo in _chosen(SIM_ALGOS, args):
        out["simulator"][algo] = {n: _simulator(algo, n, args.sim_steps)
                                  for n in args.sim_learners}
    return out


def _chosen(algos: list[str], args: argparse.Namespace) -> list[str]:
    return [a for a in algos if not args.algos or a in args.algos]


def _run(tree: Path, args: argparse.Namespace) -> dict:
    env = {**os.environ, "PYTHONPATH": str(tree), "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, str(Path(__file__).resolve()), "--one", "--learners",
           str(args.learners), "--steps", str(args.steps), "--width", str(args.width),
           "--sim-steps", str(args.sim_steps), "--sim-learners", *map(str, args.sim_learners),
           *(["--algos", *args.algos] if args.algos else [])]
    done = subprocess.run(cmd, env=env, cwd=tree, capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--baseline", type=Path, help="another checkout to measure alongside")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--learners", type=int, default=4)
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--width", type=int, default=64)
    ap.add_argument("--sim-learners", type=int, nargs="+", default=[16, 64])
    ap.add_argument("--sim-steps", type=int, default=30)
    ap.add_argument("--algos", nargs="+", help="only these strategies (default: all)")
    ap.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    if "--one" not in sys.argv:  # a measuring child runs another checkout's bench package
        from bench.results import publish_option

        publish_option(ap, __file__)
    args = ap.parse_args()
    if args.one:
        print(json.dumps(_one(args)))
        return
    trees = {"this": REPO, **({"baseline": args.baseline} if args.baseline else {})}
    runs: dict[str, list[dict]] = {name: [] for name in trees}
    for _ in range(args.repeats):  # alternately, so both see the same load
        for name, tree in trees.items():
            runs[name].append(_run(tree, args))
            print(name, runs[name][-1], file=sys.stderr)
    _report(runs, args)


def _cells(values: list, digits: int) -> list[str]:
    """The medians of each measure over the repeats ('-' where there is none)."""
    found = [v for v in values if v is not None]
    if not found:
        return ["-", "-"]
    return [f"{statistics.median(v[i] for v in found):.{digits}f}" for i in range(2)]


def _report(runs: dict[str, list[dict]], args: argparse.Namespace) -> None:
    from bench.results import publish

    names = list(runs)
    lines = [
        "## Transport cost: strategies on processes and in the simulator",
        "",
        "Command: `.venv/bin/python -m bench.transport_cost "
        f"{'--baseline DIR ' if 'baseline' in runs else ''}--repeats {args.repeats} "
        f"--learners {args.learners} --steps {args.steps} --width {args.width} "
        f"--sim-learners {' '.join(map(str, args.sim_learners))} --sim-steps {args.sim_steps} "
        + (f"--algos {' '.join(args.algos)} " if args.algos else "") +
        "--publish`"
        + (" (DIR: `git archive` of the commit before the transport interface)"
           if "baseline" in runs else "") + ". Medians of the repeats, run alternately. "
        "CPU, gloo on 127.0.0.1, torch on 1 thread per learner, on the shared 2-core machine "
        "(other jobs running: compare columns of one run, not absolute numbers).",
        "",
        f"Processes: {args.learners} learners, MLP {args.width}-{args.width}-{args.width}, "
        "batch 32, after 10 warm-up steps, mean over learners of steps/s and of the CPU time of "
        "the learner's compute thread per step (forward, backward, optimizer and the hooks' "
        "work on that thread: less sensitive to the load than steps/s; hadpsgd: nodes of 2).",
        "",
        "| strategy | " + " | ".join(f"{n}: steps/s | {n}: compute-thread CPU us/step"
                                      for n in names) + " |",
        "|---|" + "---|---|" * len(names),
    ]
    for algo in _chosen(PROCESS_ALGOS, args):
        cells = [c for n in names for c in _cells([r["processes"][algo] for r in runs[n]], 1)]
        lines.append(f"| {algo} | {' | '.join(cells)} |")
    lines += [
        "",
        "Simulator: host microseconds per learner-step, wall and CPU (all threads), a 16x16 "
        "linear model (its forward, backward and SGD step included); '-': that checkout cannot "
        "simulate the strategy.",
        "",
        "| strategy | learners | " + " | ".join(f"{n}: wall us | {n}: CPU us" for n in names)
        + " |",
        "|---|---|" + "---|---|" * len(names),
    ]
    for algo in _chosen(SIM_ALGOS, args):
        for n in args.sim_learners:
            cells = [c for name in names
                     for c in _cells([r["simulator"][algo][str(n)] for r in runs[name]], 0)]
            lines.append(f"| {algo} | {n} | {' | '.join(cells)} |")
    publish(lines, args.publish)


if __name__ == "__main__":
    main()
