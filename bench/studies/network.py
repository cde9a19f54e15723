"""Network study: two emulated nodes (Linux network namespaces joined by a veth pair, its
bandwidth limited by a ``tc`` tbf qdisc on both ends), two learners each, real processes.

Per bandwidth: a probe first times the exchanges alone (a pairwise swap of the model's weights
across the link and inside a node; an allreduce over all four and inside a node), then every
strategy trains ``--steps`` steps with sleep-based compute (:mod:`bench.studies.learner`).
A step's time splits into compute (the learner's own steps timed alone, before the run) and
the rest, the communication it waited for; the fraction of communication hidden behind compute
is ``1 - exposed wait / (the strategy's exchange alone)``. Learners 0, 1 sit in node A, 2, 3 in
node B; hadpsgd's super-learners are the nodes. Root only (namespaces, tc).

    .venv/bin/python -m bench.studies.network --rates 1gbit,250mbit,100mbit --steps 20 \\
        --publish
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from asrdist.errors import AsrdistError
from asrdist.fsutil import atomic_write
from asrdist.testing.learners import launch
from bench.harness import NS_ADDR, enter_node, limit, netns_down, netns_up, presets
from bench.results import generated, publish, publish_option
from bench.studies import figure, learner

STRATEGIES = [s for s in presets() if s[0] != "ma"]  # ma: not in this study
LEARNERS = 4  # 2 per node


def _timed(fn: Any, reps: int) -> float:
    fn()  # warm-up: connections
    dist.barrier()
    t0 = time.perf_counter()
    for _ in range(reps):
        fn()
        dist.barrier()
    return (time.perf_counter() - t0) / reps


def probe(rank: int, n: int, numel: int, reps: int) -> dict[str, float]:
    """Seconds per exchange of ``numel`` floats, alone (no compute)."""
    nodes = [dist.new_group([0, 1], timeout=timedelta(seconds=120)),
             dist.new_group([2, 3], timeout=timedelta(seconds=120))]
    mine, theirs = torch.ones(numel), torch.empty(numel)

    def swap(a: int, b: int) -> None:
        if rank in (a, b):
            other = b if rank == a else a
            works = [dist.isend(mine, other), dist.irecv(theirs, other)]
            for w in works:
                w.wait()

    out = {"swap_cross": _timed(lambda: swap(1, 2), reps),
           "swap_node": _timed(lambda: swap(0, 1), reps),
           "allreduce_all": _timed(lambda: dist.all_reduce(mine), reps),
           "allreduce_node": _timed(lambda: dist.all_reduce(mine, group=nodes[rank // 2]),
                                    reps)}
    return out


PERIODIC = ("ma", "bmuf", "diloco")  # an allreduce of the weights every ``period`` steps


def exchange_alone(algo: str, p: dict[str, float], period: int = 1) -> float:
    """What one step's communication costs with nothing to hide behind, per strategy: ssgd's
    allreduce over all; an ADPSGD swap (half the 4-ring's pairs cross the link); hadpsgd's
    node allreduce plus its leaders' swap across; the averaging methods' allreduce over all
    once a block, so ``1 / period`` of it a step."""
    if algo == "ssgd":
        return p["allreduce_all"]
    if algo in PERIODIC:
        return p["allreduce_all"] / period
    if algo == "hadpsgd":
        return p["allreduce_node"] + p["swap_cross"]
    return (p["swap_cross"] + p["swap_node"]) / 2


def summarise(algo: str, results: list[dict], p: dict[str, float], skip: int) -> dict:
    """Means over the learners (steps after ``skip`` warm-up steps)."""
    compute = sum(r["compute_s"] for r in results) / len(results)
    step = sum(sum(r["step_s"][skip:]) / len(r["step_s"][skip:]) for r in results) / len(results)
    wait = max(0.0, step - compute)
    alone = exchange_alone(algo, p)
    blocked = sum(r["metrics"]["comm_wait_s"] / len(r["step_s"]) for r in results) / len(results)
    return {"algo": algo, "compute_s": compute, "step_s": step, "wait_s": wait,
            "alone_s": alone, "hidden": min(1.0, max(0.0, 1 - wait / alone)),
            "blocked_s": blocked, "steps_s": len(results) / step}


def plot(rows: list[dict], rates: list[str], path: Path) -> None:
    fig, axes = figure.panels(len(rates), 4.6, 3.6)
    for ax, rate in zip(axes, rates, strict=True):
        sel = [r for r in rows if r["rate"] == rate]
        xs = range(len(sel))
        ax.bar(xs, [r["compute_s"] * 1000 for r in sel], label="compute")
        ax.bar(xs, [r["wait_s"] * 1000 for r in sel],
               bottom=[r["compute_s"] * 1000 for r in sel], label="communication wait")
        ax.scatter(xs, [r["alone_s"] * 1000 for r in sel], color="k", marker="_", s=200,
                   label="exchange alone", zorder=3)
        for x, r in zip(xs, sel, strict=True):
            ax.text(x, r["step_s"] * 1000, f"{r['hidden']:.0%}", ha="center", va="bottom",
                    fontsize=8)
        ax.set_xticks(list(xs), [r["algo"] for r in sel], rotation=30, ha="right", fontsize=8)
        ax.set_title(f"link {rate} (label: hidden)")
        ax.grid(axis="y", alpha=0.3)
    figure.save(fig, axes, "ms per step", path)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rates", default="1gbit,250mbit,100mbit",
                    help="tc tbf rates, comma-separated")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--sim-compute-ms", type=float, default=300.0)
    ap.add_argument("--width", type=int, default=1024)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--probe-reps", type=int, default=3)
    publish_option(ap, __file__)
    args = ap.parse_args()
    if os.geteuid() != 0:
        raise AsrdistError("bench.studies.network: network namespaces and tc need root")
    rates = args.rates.split(",")
    cfg_of = {algo: learner.Config(algo, args.steps, options, width=args.width, layers=4,
                                   batch=args.batch, sim_ms=args.sim_compute_ms)
              for algo, options in STRATEGIES}
    size = learner.numel(cfg_of["ssgd"])
    if not netns_up():
        raise AsrdistError("bench.studies.network: cannot create the network namespaces")
    rows, probes, loads = [], {}, []
    try:
        for rate in rates:
            limit(rate)
            p = launch(probe, LEARNERS, size, args.probe_reps, addr=NS_ADDR[0],
                       setup=enter_node)
            probes[rate] = {k: max(r[k] for r in p) for k in p[0]}
            print(f"-- {rate}: {json.dumps(probes[rate])}", file=sys.stderr, flush=True)
            for algo, _ in STRATEGIES:
                loads.append(os.getloadavg()[0])
                res = launch(learner.run, LEARNERS, cfg_of[algo], addr=NS_ADDR[0],
                             setup=enter_node)
                rows.append({"rate": rate, **summarise(algo, res, probes[rate], skip=2)})
                print(f"   {rows[-1]}", file=sys.stderr, flush=True)
    finally:
        netns_down()
    mbytes = size * 4 / 1e6
    with atomic_write(generated(__file__, ".json")) as f:
        json.dump({"bytes": size * 4, "probes": probes, "rows": rows,
                   "sim_compute_ms": args.sim_compute_ms}, f, indent=1)
    plot(rows, rates, generated(__file__, ".png"))
    cmd = (f".venv/bin/python -m bench.studies.network --rates {args.rates} --steps {args.steps}"
           f" --sim-compute-ms {args.sim_compute_ms:g} --width {args.width} --batch {args.batch}"
           " --publish")
    lines = [
        "## Network: communication hidden behind compute (2 netns nodes x 2 learners)", "",
        f"Two network namespaces joined by a veth pair, `tc tbf` on both ends at each rate; "
        f"learners 0-1 in node A, 2-3 in node B (real processes, gloo over the veth; same-node "
        f"traffic over the namespace's loopback). Model: MLP 4x{args.width}, {mbytes:.1f} MB "
        f"of float32 weights per exchange; {args.sim_compute_ms:g} ms of sleep-based compute "
        f"per step (1/3 forward, 2/3 backward, spread over the layers) plus the real CPU "
        f"forward/backward at batch {args.batch}; {args.steps} steps per run (few, to fit the "
        "time budget), the first 2 left out. Compute = the learner's step timed alone before "
        "the run; wait = step - compute; alone = that strategy's exchange timed with nothing "
        "else running (ssgd: allreduce of 4; adpsgd: mean of a cross-link and a same-node "
        "swap; hadpsgd: node allreduce + cross-link swap); hidden = 1 - wait / alone. "
        "'Blocked, own timer' is the strategy's `comm_wait_s` per step (its hooks' waits; "
        "ssgd's allreduce waits inside DDP's backward, so it shows 0 there). "
        f"2 CPU cores shared with other jobs (1-minute load average {min(loads):.1f} to "
        f"{max(loads):.1f} during the runs): compare rows of one rate, not absolute times.", "",
        f"Command (root): `{cmd}` (`make network`)", "",
        "Exchanges alone (ms): " + "; ".join(
            f"{rate}: swap across {p['swap_cross'] * 1000:.0f}, swap in node "
            f"{p['swap_node'] * 1000:.0f}, allreduce of 4 {p['allreduce_all'] * 1000:.0f}, "
            f"node allreduce {p['allreduce_node'] * 1000:.0f} (link {mbytes / p['swap_cross']:.0f}"
            " MB/s per direction)" for rate, p in probes.items()), "",
        "| link | strategy | compute (ms) | step (ms) | wait (ms) | blocked, own timer (ms) "
        "| exchange alone (ms) | hidden | steps/s (all) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(f"| {r['rate']} | {r['algo']} | {r['compute_s'] * 1000:.0f} | "
                     f"{r['step_s'] * 1000:.0f} | {r['wait_s'] * 1000:.0f} | "
                     f"{r['blocked_s'] * 1000:.0f} | {r['alone_s'] * 1000:.0f} | "
                     f"{r['hidden']:.0%} | {r['steps_s']:.1f} |")
    lines += ["", "![network study](network.png)"]
    publish(lines, args.publish)


if __name__ == "__main__":
    main()
