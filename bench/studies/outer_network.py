"""Outer optimizers on a real slow link: BMUF and DiLoCo against ADPSGD, 4 real learners on the
network study's two namespaces (:mod:`bench.studies.network`: two nodes x two learners, a veth
between them rate-limited by ``tc tbf``).

Per rate: the probe of :mod:`bench.studies.network` times the exchanges alone, then every
method trains ``--steps`` steps of the sleep-based learner (:mod:`bench.studies.learner`; its
model, a 4 x 1024 MLP, is 16.9 MB of weights) on a task it learns within the run (a linear
teacher on inputs in a ``--input-rank``-dimensional subspace). Learner 0's weights every
``--eval-every`` steps and the final average are evaluated on held-out data, so the study
shows the held-out CE at equal steps and against wall time. Methods: ssgd (allreduce every
step, the reference), adpsgd-random (a swap every step, behind compute), ma / bmuf / diloco
(an allreduce every H steps, blocking; ``--periods``, ``--ma-periods``).

Communication: a step's wait is its time less its compute (timed alone before the run); the
exchange alone per step is the probe's figure for what the method sends in a step (the
averaging methods': one allreduce of 4 over H steps); hidden = 1 - wait / alone, as in the
network study. Root only (namespaces, tc), except with ``--loopback``: the same runs on
127.0.0.1 with no link between nodes, for choosing the outer optimizers' settings cheaply
(with ``--sim-compute-ms 0`` and ``--only``; the synchronous methods train the same weights
whatever the link).

    .venv/bin/python -m bench.studies.outer_network --rates 100mbit --steps 200 \\
        --publish
    .venv/bin/python -m bench.studies.outer_network --loopback --sim-compute-ms 0 \\
        --only "bmuf H=10" --bmuf-block-lr 0.25
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from asrdist.errors import AsrdistError
from asrdist.fsutil import atomic_write
from asrdist.testing.learners import launch
from bench.harness import NS_ADDR, enter_node, limit, netns_down, netns_up
from bench.results import generated, publish, publish_option
from bench.studies import figure, learner
from bench.studies.network import LEARNERS, exchange_alone, probe

SKIP = 2  # warm-up steps left out of the step time


def methods(periods: list[int], ma_periods: list[int],
            only: list[str] | None = None) -> dict[str, tuple[str, int]]:
    """label -> (strategy, H): ssgd and adpsgd-random, then ma at ``ma_periods`` and bmuf and
    diloco at ``periods`` (H = 1 for the two that exchange every step); just the labels of
    ``only`` when given."""
    for h in [*periods, *ma_periods]:
        if h < 1:
            raise AsrdistError(f"bench.studies.outer_network: --periods / --ma-periods: {h} "
                               "is not a period (steps between averages, >= 1)")
    out = {"ssgd": ("ssgd", 1), "adpsgd-random": ("adpsgd-random", 1)}
    out.update({f"ma H={h}": ("ma", h) for h in ma_periods})
    for algo in ("bmuf", "diloco"):
        out.update({f"{algo} H={h}": (algo, h) for h in periods})
    if only:
        unknown = [label for label in only if label not in out]
        if unknown:
            raise AsrdistError(f"bench.studies.outer_network: --only {unknown[0]!r}: not one "
                               f"of {', '.join(out)}")
        out = {label: run for label, run in out.items() if label in only}
    return out


def config(algo: str, period: int, args: argparse.Namespace) -> learner.Config:
    """One method's run: the same model, task and steps for all; its own options and lr."""
    options: dict[str, Any] = {}
    lr = args.lr
    if algo in ("ma", "bmuf", "diloco"):
        options["avg_period"] = period
    if algo == "bmuf":
        options.update(bmuf_momentum=args.bmuf_momentum, bmuf_lr=args.bmuf_block_lr)
        lr = args.bmuf_inner_lr
    if algo == "diloco":
        options.update(diloco_lr=args.diloco_lr, diloco_momentum=args.diloco_momentum)
    return learner.Config(algo, args.steps, options, width=args.width, layers=4,
                          batch=args.batch, sim_ms=args.sim_compute_ms,
                          eval_every=args.eval_every, lr=lr, input_rank=args.input_rank)


def time_to(curve: list[tuple[float, float]], target: float) -> float | None:
    """Wall time of the first point of ``curve`` ((time, CE), in time order) at or below
    ``target``; None if none is."""
    return next((t for t, ce in curve if ce <= target), None)


def summarise(label: str, algo: str, period: int, results: list[dict],
              p: dict[str, float]) -> dict[str, Any]:
    """One run's figures, means over the learners: compute and step time (steps after the
    first ``SKIP``), the wait and what of the exchange it hid, steps of all learners per
    second at the mean pace and over the whole run (until the last learner's last step: the
    learners of an asynchronous run may end far apart), the final average's CE, and learner
    0's CE curve ending with that average."""
    compute = sum(r["compute_s"] for r in results) / len(results)
    step = sum(sum(r["step_s"][SKIP:]) / len(r["step_s"][SKIP:])
               for r in results) / len(results)
    wait = max(0.0, step - compute)
    alone = exchange_alone(algo, p, period)
    lead = results[0]
    final_s = max(r["final_s"] for r in results)
    done_s = max(r["done_s"] for r in results)
    curve = [(t, ce) for t, _, ce in lead["evals"]] + [(final_s, lead["final_ce"])]
    return {"label": label, "algo": algo, "period": period, "compute_s": compute,
            "step_s": step, "wait_s": wait, "alone_s": alone,
            "hidden": min(1.0, max(0.0, 1 - wait / alone)), "steps_s": len(results) / step,
            "done_s": done_s, "run_steps_s": sum(len(r["step_s"]) for r in results) / done_s,
            "final_s": final_s, "final_ce": lead["final_ce"], "curve": curve,
            "steps_curve": [(s, ce) for _, s, ce in lead["evals"]]}


def plot(rows: list[dict], rates: list[str], path: Path) -> None:
    """Per rate: held-out CE against wall time, and against steps."""
    fig, axes = figure.panels(2 * len(rates), 4.4, 3.6)
    for i, rate in enumerate(rates):
        sel = [r for r in rows if r["rate"] == rate]
        lines = figure.curves(axes[2 * i], f"link {rate}: against wall time", "wall time (s)",
                              [(r["label"], [t for t, _ in r["curve"]],
                                [c for _, c in r["curve"]]) for r in sel])
        for r, line in zip(sel, lines, strict=True):
            axes[2 * i].scatter([r["final_s"]], [r["final_ce"]], color=line.get_color(),
                                marker="*", zorder=3)
        figure.curves(axes[2 * i + 1], f"link {rate}: against steps (learner 0)", "step",
                      [(r["label"], [s for s, _ in r["steps_curve"]],
                        [c for _, c in r["steps_curve"]]) for r in sel])
    figure.save(fig, axes, "held-out CE (line: learner 0; star: final average)", path)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rates", default="100mbit", help="tc tbf rates, comma-separated")
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--periods", type=int, nargs="+", default=[10, 50],
                    help="bmuf's and diloco's H (steps per block)")
    ap.add_argument("--ma-periods", type=int, nargs="*", default=[10],
                    help="plain averaging's H (none: no ma run)")
    ap.add_argument("--sim-compute-ms", type=float, default=300.0)
    ap.add_argument("--width", type=int, default=1024)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--input-rank", type=int, default=16)
    ap.add_argument("--lr", type=float, default=0.03, help="the learners' lr (momentum 0.9)")
    ap.add_argument("--bmuf-inner-lr", type=float, help="bmuf's learners' lr (default: --lr)")
    ap.add_argument("--bmuf-momentum", type=float, default=-1.0, help="eta (-1: 1 - 1/N)")
    ap.add_argument("--bmuf-block-lr", type=float, default=0.25,
                    help="zeta; 1/N: the steady-state block step is ma's (CNTK's 1 is N times "
                         "it and diverged here)")
    ap.add_argument("--diloco-lr", type=float, default=0.35,
                    help="outer lr (the paper's 0.7 oscillated here at H = 10)")
    ap.add_argument("--diloco-momentum", type=float, default=0.9)
    ap.add_argument("--eval-every", type=int, default=10)
    ap.add_argument("--target-ce", type=float, default=2.0,
                    help="a held-out CE whose time to reach the table gives")
    ap.add_argument("--probe-reps", type=int, default=3)
    ap.add_argument("--only", nargs="+", help="run just these methods (labels as in the table)")
    ap.add_argument("--loopback", action="store_true",
                    help="all learners on 127.0.0.1, no namespaces or rate limit (no root)")
    publish_option(ap, __file__)
    args = ap.parse_args(argv)
    if args.bmuf_inner_lr is None:
        args.bmuf_inner_lr = args.lr
    if args.steps <= SKIP:
        raise AsrdistError(f"bench.studies.outer_network: --steps {args.steps}: more than "
                           f"{SKIP} (the warm-up steps left out) are needed")
    if args.eval_every < 1:
        raise AsrdistError(f"bench.studies.outer_network: --eval-every {args.eval_every}: "
                           "the curves need an evaluation every so many steps (>= 1)")
    if args.loopback and args.publish:
        raise AsrdistError("bench.studies.outer_network: --loopback with --publish: a run without "
                           "the link is for tuning and writes no section")
    return args


def main() -> None:
    args = parse_args()
    runs = methods(args.periods, args.ma_periods, args.only)
    size = learner.numel(config("ssgd", 1, args))
    if args.loopback:
        rates, where = ["loopback"], {"addr": "127.0.0.1", "setup": None}
    else:
        if os.geteuid() != 0:
            raise AsrdistError("bench.studies.outer_network: network namespaces and tc need "
                               "root (--loopback runs without them)")
        rates, where = args.rates.split(","), {"addr": NS_ADDR[0], "setup": enter_node}
        if not netns_up():
            raise AsrdistError("bench.studies.outer_network: cannot create the network "
                               "namespaces")
    rows, probes, loads = [], {}, []
    try:
        for rate in rates:
            if not args.loopback:
                limit(rate)
            got = launch(probe, LEARNERS, size, args.probe_reps, **where)
            probes[rate] = {k: max(r[k] for r in got) for k in got[0]}
            print(f"-- {rate}: {json.dumps(probes[rate])}", file=sys.stderr, flush=True)
            for label, (algo, period) in runs.items():
                loads.append(os.getloadavg()[0])
                res = launch(learner.run, LEARNERS, config(algo, period, args), **where,
                             timeout_s=1800)
                rows.append({"rate": rate, **summarise(label, algo, period, res,
                                                       probes[rate])})
                r = rows[-1]
                print(f"   {label}: step {r['step_s'] * 1000:.0f} ms, final CE "
                      f"{r['final_ce']:.3f} at {r['final_s']:.0f} s", file=sys.stderr,
                      flush=True)
    finally:
        if not args.loopback:
            netns_down()
    if args.loopback:  # a tuning run: its table only, the study's files stay as they are
        publish(section(args, rows, probes, loads, size * 4 / 1e6), None)
        return
    with atomic_write(generated(__file__, ".json")) as f:
        json.dump({"bytes": size * 4, "probes": probes, "rows": rows, "loads": loads,
                   "args": vars(args)}, f, indent=1)
    plot(rows, rates, generated(__file__, ".png"))
    publish(section(args, rows, probes, loads, size * 4 / 1e6), args.publish)


def section(args: argparse.Namespace, rows: list[dict], probes: dict[str, dict],
            loads: list[float], mbytes: float) -> list[str]:
    """The generated section of a finished study."""
    cmd = (f".venv/bin/python -m bench.studies.outer_network --rates {args.rates} "
           f"--steps {args.steps} --periods {' '.join(map(str, args.periods))} "
           f"--ma-periods{''.join(f' {h}' for h in args.ma_periods)} "
           f"--sim-compute-ms {args.sim_compute_ms:g} --width {args.width} --batch {args.batch} "
           f"--input-rank {args.input_rank} --lr {args.lr:g} "
           f"--bmuf-inner-lr {args.bmuf_inner_lr:g} --bmuf-momentum {args.bmuf_momentum:g} "
           f"--bmuf-block-lr {args.bmuf_block_lr:g} --diloco-lr {args.diloco_lr:g} "
           f"--diloco-momentum {args.diloco_momentum:g} --eval-every {args.eval_every} "
           f"--target-ce {args.target_ce:g}")
    if args.only:
        cmd += " --only " + " ".join(f'"{label}"' for label in args.only)
    cmd += " --loopback" if args.loopback else " --publish"
    eta = "1 - 1/N = 0.75" if args.bmuf_momentum == -1 else f"{args.bmuf_momentum:g}"
    lines = [
        "## Outer optimizers on a real slow link: BMUF and DiLoCo against ADPSGD "
        "(2 netns nodes x 2 learners)", "",
        f"The network study's harness (two namespaces, a veth rate-limited by `tc tbf` at each "
        f"rate; learners 0-1 in node A, 2-3 in node B; real processes, gloo), its model (MLP "
        f"4x{args.width}, {mbytes:.1f} MB of float32 weights) and {args.sim_compute_ms:g} ms "
        f"of sleep-based compute per step plus the real CPU forward/backward at batch "
        f"{args.batch}. The task: a fixed linear teacher's 32 classes on inputs in a random "
        f"{args.input_rank}-dimensional subspace (learnable within the run). {args.steps} "
        f"steps per learner for every method; learners' SGD lr {args.lr:g}, momentum 0.9 "
        f"(bmuf's learners: lr {args.bmuf_inner_lr:g}; block momentum eta {eta}, block lr "
        f"zeta {args.bmuf_block_lr:g}, Nesterov; diloco: outer lr {args.diloco_lr:g}, "
        f"momentum {args.diloco_momentum:g}, Nesterov).", "",
        "Compute = the learner's step timed alone before the run; step = mean step time over "
        f"the learners (the first {SKIP} left out), the blocking averages included; wait = "
        "step - compute; exchange alone per step = what the method sends in a step, timed "
        "with nothing else running (ssgd: an allreduce of 4; adpsgd: mean of a cross-link and "
        "a same-node swap; ma / bmuf / diloco: an allreduce of 4 divided by H); hidden = "
        "1 - wait / alone. Steps/s: of all 4 learners, at the mean step time (mean pace) and "
        "over the run (all steps by the end of the last learner's last step; asynchronous "
        "learners may end far apart). Final CE = the final "
        "average of the 4 learners on 1024 held-out samples, at equal steps; the curve is "
        f"learner 0's own weights every {args.eval_every} steps (snapshots evaluated after the "
        "run, so the evaluations cost the run nothing), then that final average. 'Time to' "
        "a CE = wall time of the first point of the curve at or below it: ssgd's and "
        "adpsgd-random's final CE of that rate, and a fixed level ('-': never). 2 CPU "
        "cores shared with other jobs (1-minute "
        f"load average {min(loads):.1f} to {max(loads):.1f} at the runs' starts): the sleeps "
        "are exact, the real compute and gloo's copies are not.", "",
        f"Command (root): `{cmd}` (`make outer-network`)", "",
        "Exchanges alone (ms): " + "; ".join(
            f"{rate}: swap across {p['swap_cross'] * 1000:.0f}, swap in node "
            f"{p['swap_node'] * 1000:.0f}, allreduce of 4 {p['allreduce_all'] * 1000:.0f}"
            for rate, p in probes.items()), "",
        "| link | method | compute (ms) | step (ms) | wait (ms) | exchange alone per step (ms) "
        "| hidden | steps/s (all, mean pace) | steps/s (all, whole run) | final CE "
        "| final average at (s) | time to ssgd's CE (s) | time to adpsgd's CE (s) "
        f"| time to CE {args.target_ce:g} (s) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]

    def reached(r: dict, algo: str | None) -> str:
        ref = next((x["final_ce"] for x in rows if x["rate"] == r["rate"] and
                    x["algo"] == algo), None) if algo else args.target_ce
        t = None if ref is None else time_to(r["curve"], ref)
        return "-" if t is None else f"{t:.0f}"

    for r in rows:
        lines.append(f"| {r['rate']} | {r['label']} | {r['compute_s'] * 1000:.0f} | "
                     f"{r['step_s'] * 1000:.0f} | {r['wait_s'] * 1000:.0f} | "
                     f"{r['alone_s'] * 1000:.0f} | {r['hidden']:.0%} | {r['steps_s']:.2f} | "
                     f"{r['run_steps_s']:.2f} | {r['final_ce']:.3f} | {r['final_s']:.0f} | "
                     f"{reached(r, 'ssgd')} | {reached(r, 'adpsgd-random')} | "
                     f"{reached(r, None)} |")
    lines += ["", "![outer optimizers on a slow link](outer_network.png)"]
    return lines


if __name__ == "__main__":
    main()
