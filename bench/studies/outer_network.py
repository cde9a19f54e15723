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
(an allreduce every H steps, blocking; ``--periods``, ``--ma-periods``), streaming-diloco (the
average of each of its fragments overlapping ``tau`` = 1 step) and diloco-async (each learner
pushes its block's pseudo-gradient to learner 0 and pulls the global weights, no barrier) at
``--periods``, adpsgd-random, diloco and streaming-diloco with ``--compress`` (at the first
period), and the reference all of them are held to: a single learner at the global batch
(``--batch`` x 4, the maths of ssgd) on no link, whose step is its compute.

The goal (issue 34): some method reaches the single learner's CE within 2 % with a step of at
most 1.1x its own compute.

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

The point that met the goal (streaming model averaging with overlapped int8 averages), its own
section beside the study's (``--publish FILE`` puts the JSON and figure beside FILE)::

    .venv/bin/python -m bench.studies.outer_network --rates 100mbit --steps 200 --periods 6 \\
        --ma-periods --diloco-lr 1 --diloco-momentum 0 --stream-delay 3 \\
        --only "single learner" "streaming-diloco H=6 int8" \\
        --publish bench/results/outer_network_goal.md
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from pathlib import Path
from typing import Any, NamedTuple

from asrdist.errors import AsrdistError
from asrdist.fsutil import atomic_write
from asrdist.parallel.rules.compress import CODECS, make_codec
from asrdist.testing.learners import launch
from bench.harness import NS_ADDR, enter_node, limit, netns_down, netns_up
from bench.results import generated, publish, publish_option, shown
from bench.studies import figure, learner
from bench.studies.network import LEARNERS, exchange_alone, probe

SKIP = 2  # warm-up steps left out of the step time
SINGLE = "single learner"  # the reference: one learner at the global batch, no link
GOAL_CE, GOAL_STEP = 1.02, 1.1  # within 2 % of the single learner's CE, step <= 1.1x compute
OUTER = ("bmuf", "diloco", "streaming-diloco", "diloco-async")  # run at every --periods


class Method(NamedTuple):
    """One row of the study: a strategy, its H, its exchange's encoding, its learners."""

    algo: str
    period: int
    compress: str = "none"
    learners: int = LEARNERS


def methods(periods: list[int], ma_periods: list[int], only: list[str] | None = None,
            compress: str = "none") -> dict[str, Method]:
    """label -> method: the single learner, ssgd and adpsgd-random, then ma at
    ``ma_periods``, bmuf, diloco, streaming-diloco and diloco-async at ``periods`` (H = 1 for
    the two that exchange every step), then adpsgd-random, diloco and streaming-diloco with
    ``compress`` (at the first period; none: no such rows); just the labels of ``only`` when
    given."""
    for h in [*periods, *ma_periods]:
        if h < 1:
            raise AsrdistError(f"bench.studies.outer_network: --periods / --ma-periods: {h} "
                               "is not a period (steps between averages, >= 1)")
    if compress not in CODECS:
        raise AsrdistError(f"bench.studies.outer_network: --compress {compress!r}: not one of "
                           f"{', '.join(CODECS)}")
    out = {SINGLE: Method("ssgd", 1, learners=1), "ssgd": Method("ssgd", 1),
           "adpsgd-random": Method("adpsgd-random", 1)}
    out.update({f"ma H={h}": Method("ma", h) for h in ma_periods})
    for algo in OUTER:
        out.update({f"{algo} H={h}": Method(algo, h) for h in periods})
    if compress != "none":
        out[f"adpsgd-random {compress}"] = Method("adpsgd-random", 1, compress)
        for algo in ("diloco", "streaming-diloco"):
            out[f"{algo} H={periods[0]} {compress}"] = Method(algo, periods[0], compress)
    if only:
        unknown = [label for label in only if label not in out]
        if unknown:
            raise AsrdistError(f"bench.studies.outer_network: --only {unknown[0]!r}: not one "
                               f"of {', '.join(out)}")
        out = {label: run for label, run in out.items() if label in only}
    return out


def config(algo: str, period: int, args: argparse.Namespace, compress: str = "none",
           learners: int = LEARNERS) -> learner.Config:
    """One method's run: the same model, task, steps and global batch for all (a single
    learner takes the 4 learners' batches at once); its own options and lr."""
    options: dict[str, Any] = {}
    lr = args.lr
    if algo in ("ma", *OUTER):
        options["avg_period"] = period
    if algo == "bmuf":
        options.update(bmuf_momentum=args.bmuf_momentum, bmuf_lr=args.bmuf_block_lr)
        lr = args.bmuf_inner_lr
    if algo in ("diloco", "streaming-diloco", "diloco-async"):
        options.update(diloco_lr=args.diloco_lr, diloco_momentum=args.diloco_momentum)
    if algo == "streaming-diloco":
        options.update(stream_fragments=args.stream_fragments, stream_delay=args.stream_delay,
                       stream_alpha=args.stream_alpha)
    if compress != "none":
        options["compress"] = compress
    return learner.Config(algo, args.steps, options, width=args.width, layers=4,
                          batch=args.batch * LEARNERS // learners, sim_ms=args.sim_compute_ms,
                          eval_every=args.eval_every, lr=lr, input_rank=args.input_rank)


def alone_per_step(m: Method, p: dict[str, float], numel: int) -> float:
    """What ``m`` sends in a step, timed alone (the probe's float32 figures), scaled by its
    encoding's bytes: the network study's figure for the exchange every step and the
    averages (streaming-diloco sends diloco's bytes, in fragments); diloco-async a push and
    a pull (w_g comes back float32) a block, about a swap across; a single learner none."""
    if m.learners == 1:
        return 0.0
    ratio = make_codec(m.compress).wire_bytes(numel) / (4 * numel)
    if m.algo == "diloco-async":
        return p["swap_cross"] * (ratio + 1) / 2 / m.period
    base = "diloco" if m.algo == "streaming-diloco" else m.algo
    return exchange_alone(base, p, m.period) * ratio


def time_to(curve: list[tuple[float, float]], target: float) -> float | None:
    """Wall time of the first point of ``curve`` ((time, CE), in time order) at or below
    ``target``; None if none is."""
    return next((t for t, ce in curve if ce <= target), None)


def summarise(label: str, m: Method, results: list[dict], p: dict[str, float],
              numel: int) -> dict[str, Any]:
    """One run's figures, means over the learners: compute and step time (steps after the
    first ``SKIP``), the wait and what of the exchange it hid, steps of all learners per
    second at the mean pace and over the whole run (until the last learner's last step: the
    learners of an asynchronous run may end far apart), the final average's CE, and learner
    0's CE curve ending with that average, and the MB each learner sent (its strategy's
    count) over the steps; hidden is None without an exchange."""
    compute = sum(r["compute_s"] for r in results) / len(results)
    step = sum(sum(r["step_s"][SKIP:]) / len(r["step_s"][SKIP:])
               for r in results) / len(results)
    wait = max(0.0, step - compute)
    alone = alone_per_step(m, p, numel)
    lead = results[0]
    final_s = max(r["final_s"] for r in results)
    done_s = max(r["done_s"] for r in results)
    curve = [(t, ce) for t, _, ce in lead["evals"]] + [(final_s, lead["final_ce"])]
    sent = [r.get("metrics", {}).get("sent_bytes") for r in results]
    return {"label": label, "algo": m.algo, "period": m.period, "compress": m.compress,
            "learners": m.learners, "compute_s": compute, "step_s": step, "wait_s": wait,
            "alone_s": alone,
            "hidden": min(1.0, max(0.0, 1 - wait / alone)) if alone > 0 else None,
            "steps_s": len(results) / step,
            "sent_mb": None if None in sent else sum(sent) / len(sent) / 1e6,
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
    ap.add_argument("--stream-fragments", type=int, default=2,
                    help="streaming-diloco's fragments (asrdist-train's default)")
    ap.add_argument("--stream-delay", type=int, default=1,
                    help="streaming-diloco's tau: steps its averages overlap")
    ap.add_argument("--stream-alpha", type=float, default=0.0,
                    help="streaming-diloco's mix of the local fragment on arrival")
    ap.add_argument("--compress", default="int8",
                    help="the encoding of the compressed rows (adpsgd-random, diloco and "
                         "streaming-diloco at the first period; none: no such rows)")
    ap.add_argument("--eval-every", type=int, default=10)
    ap.add_argument("--target-ce", type=float, default=2.0,
                    help="a held-out CE whose time to reach the table gives")
    ap.add_argument("--probe-reps", type=int, default=3)
    ap.add_argument("--only", nargs="+", help="run just these methods (labels as in the table)")
    ap.add_argument("--from-log", type=Path,
                    help="run nothing: write the study's files from a run's log (its stderr)")
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
    if args.compress not in CODECS:
        raise AsrdistError(f"bench.studies.outer_network: --compress {args.compress!r}: not "
                           f"one of {', '.join(CODECS)}")
    if args.loopback and args.publish:
        raise AsrdistError("bench.studies.outer_network: --loopback with --publish: a run without "
                           "the link is for tuning and writes no section")
    return args


def from_log(text: str) -> tuple[dict[str, dict[str, float]], list[dict]]:
    """The probes and rows a run printed to its log (``-- RATE: {...}`` and ``   row {...}``
    lines), so a run that ended before writing its files can still be published."""
    probes, rows = {}, []
    for line in text.splitlines():
        if line.startswith("-- ") and ": {" in line:
            rate, _, body = line[3:].partition(": ")
            probes[rate] = json.loads(body)
        elif line.startswith("   row {"):
            rows.append(json.loads(line[len("   row "):]))
    if not rows:
        raise AsrdistError("bench.studies.outer_network: --from-log: no '   row {...}' line in "
                           "the log")
    return probes, rows


def main() -> None:
    args = parse_args()
    runs = methods(args.periods, args.ma_periods, args.only, args.compress)
    size = learner.numel(config("ssgd", 1, args))
    if args.from_log:
        probes, rows = from_log(args.from_log.read_text())
        write(args, rows, probes, size)
        return
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
    rows: list[dict] = []
    probes: dict[str, dict[str, float]] = {}
    try:
        for rate in rates:
            if not args.loopback:
                limit(rate)
            got = launch(probe, LEARNERS, size, args.probe_reps, **where)
            probes[rate] = {k: max(r[k] for r in got) for k in got[0]}
            print(f"-- {rate}: {json.dumps(probes[rate])}", file=sys.stderr, flush=True)
            for label, m in runs.items():
                load = os.getloadavg()[0]
                res = launch(learner.run, m.learners,
                             config(m.algo, m.period, args, m.compress, m.learners), **where,
                             timeout_s=1800)
                rows.append({"rate": rate, "load": load,
                             **summarise(label, m, res, probes[rate], size)})
                r = rows[-1]
                print(f"   {label}: step {r['step_s'] * 1000:.0f} ms, final CE "
                      f"{r['final_ce']:.3f} at {r['final_s']:.0f} s", file=sys.stderr,
                      flush=True)
                print(f"   row {json.dumps(r)}", file=sys.stderr, flush=True)  # a log to salvage
    finally:
        if not args.loopback:
            netns_down()
    if args.loopback:  # a tuning run: its table only, the study's files stay as they are
        publish(section(args, rows, probes, size * 4 / 1e6), None)
        return
    write(args, rows, probes, size)


def write(args: argparse.Namespace, rows: list[dict], probes: dict[str, dict[str, float]],
          size: int) -> None:
    """The study's section, and with ``--publish FILE`` its JSON and figure beside FILE (a run
    that is not published leaves the published ones as they are)."""
    if args.publish:
        with atomic_write(args.publish.with_suffix(".json")) as f:
            given = {k: shown(v, "FILE") if isinstance(v, Path) else v
                     for k, v in vars(args).items()}  # no path of this machine
            json.dump({"bytes": size * 4, "probes": probes, "rows": rows, "args": given},
                      f, indent=1)
        plot(rows, list(probes), args.publish.with_suffix(".png"))
    publish(section(args, rows, probes, size * 4 / 1e6), args.publish)


def section(args: argparse.Namespace, rows: list[dict], probes: dict[str, dict],
            mbytes: float) -> list[str]:
    """The generated section of a finished study."""
    cmd = (f".venv/bin/python -m bench.studies.outer_network --rates {args.rates} "
           f"--steps {args.steps} --periods {' '.join(map(str, args.periods))} "
           f"--ma-periods{''.join(f' {h}' for h in args.ma_periods)} "
           f"--sim-compute-ms {args.sim_compute_ms:g} --width {args.width} --batch {args.batch} "
           f"--input-rank {args.input_rank} --lr {args.lr:g} "
           f"--bmuf-inner-lr {args.bmuf_inner_lr:g} --bmuf-momentum {args.bmuf_momentum:g} "
           f"--bmuf-block-lr {args.bmuf_block_lr:g} --diloco-lr {args.diloco_lr:g} "
           f"--diloco-momentum {args.diloco_momentum:g} "
           f"--stream-fragments {args.stream_fragments} --stream-delay {args.stream_delay} "
           f"--stream-alpha {args.stream_alpha:g} --eval-every {args.eval_every} "
           f"--compress {args.compress} --target-ce {args.target_ce:g}")
    if args.only:
        cmd += " --only " + " ".join(f'"{label}"' for label in args.only)
    if args.loopback:
        cmd += " --loopback"
    elif args.publish and Path(args.publish).resolve() != generated(__file__).resolve():
        cmd += f" --publish {shown(args.publish, 'FILE')}"
    else:
        cmd += " --publish"
    eta = "1 - 1/N = 0.75" if args.bmuf_momentum == -1 else f"{args.bmuf_momentum:g}"
    lines = [
        "## Outer optimizers on a real slow link: BMUF, DiLoCo, Streaming and asynchronous "
        "DiLoCo against ADPSGD, with and without compression (2 netns nodes x 2 learners)", "",
        f"The network study's harness (two namespaces, a veth rate-limited by `tc tbf` at each "
        f"rate; learners 0-1 in node A, 2-3 in node B; real processes, gloo), its model (MLP "
        f"4x{args.width}, {mbytes:.1f} MB of float32 weights) and {args.sim_compute_ms:g} ms "
        f"of sleep-based compute per step plus the real CPU forward/backward at batch "
        f"{args.batch}. The task: a fixed linear teacher's 32 classes on inputs in a random "
        f"{args.input_rank}-dimensional subspace (learnable within the run). {args.steps} "
        f"steps per learner for every method; learners' SGD lr {args.lr:g}, momentum 0.9 "
        f"(bmuf's learners: lr {args.bmuf_inner_lr:g}; block momentum eta {eta}, block lr "
        f"zeta {args.bmuf_block_lr:g}, Nesterov; diloco, streaming-diloco and diloco-async: "
        f"outer lr {args.diloco_lr:g}, momentum {args.diloco_momentum:g}, Nesterov; "
        f"streaming-diloco: {args.stream_fragments} fragments, each average overlapping "
        f"tau = {args.stream_delay} steps, alpha {args.stream_alpha:g}; diloco-async at its "
        "defaults: delayed Nesterov with a buffer of 4 "
        f"pushes). Compressed rows: `--compress {args.compress}` (error feedback). The "
        f"{SINGLE}: one process, batch {args.batch * LEARNERS} (the 4 learners' batches at "
        "once: ssgd's maths), no link, the same steps; its step is its compute.", "",
        "Compute = the learner's step timed alone before the run; step = mean step time over "
        f"the learners (the first {SKIP} left out), the blocking averages included; wait = "
        "step - compute; exchange alone per step = what the method sends in a step, timed "
        "with nothing else running (ssgd: an allreduce of 4; adpsgd: mean of a cross-link and "
        "a same-node swap; ma / bmuf / diloco / streaming-diloco: an allreduce of 4 divided by "
        "H; diloco-async: a swap across divided by H, for its push and pull; a compressed "
        "row's scaled by its encoding's bytes, an estimate); hidden = "
        "1 - wait / alone. MB sent = the bytes each learner's strategy sent over the steps "
        "(its own count; the final average not included), mean over the learners. Steps/s: "
        "of all 4 learners, at the mean step time (mean pace) and "
        "over the run (all steps by the end of the last learner's last step; asynchronous "
        "learners may end far apart). Final CE = the final "
        "average of the 4 learners on 1024 held-out samples, at equal steps; the curve is "
        f"learner 0's own weights every {args.eval_every} steps (snapshots evaluated after the "
        "run, so the evaluations cost the run nothing), then that final average. 'Time to' "
        "a CE = wall time of the first point of the curve at or below it: ssgd's and "
        "adpsgd-random's final CE of that rate, and a fixed level ('-': never). 2 CPU "
        f"cores shared with other jobs ({_loads(rows)}): the sleeps "
        "are exact, the real compute and gloo's copies are not.", "",
        f"Command (root): `{cmd}` (`make outer-network`)"
        + (" (this section: written from that run's log with `--from-log`)"
           if args.from_log else ""), "",
        "Exchanges alone (ms): " + "; ".join(
            f"{rate}: swap across {p['swap_cross'] * 1000:.0f}, swap in node "
            f"{p['swap_node'] * 1000:.0f}, allreduce of 4 {p['allreduce_all'] * 1000:.0f}"
            for rate, p in probes.items()), "",
        "| link | method | MB sent / learner | compute (ms) | step (ms) | step / compute "
        "| wait (ms) | exchange alone per step (ms) | hidden | steps/s (all, mean pace) "
        "| steps/s (all, whole run) | final CE | CE / single's | final average at (s) "
        f"| time to the {SINGLE}'s CE + 2 % (s) | time to ssgd's CE (s) "
        f"| time to adpsgd's CE (s) | time to CE {args.target_ce:g} (s) "
        "| goal (step against the median compute) |",
        "|" + "---|" * 19,
    ]

    def final_of(rate: str, label: str) -> float | None:
        return next((x["final_ce"] for x in rows if (x["rate"], x["label"]) == (rate, label)),
                    None)

    def reached(r: dict, ref: float | None) -> str:
        t = None if ref is None else time_to(r["curve"], ref)
        return "-" if t is None else f"{t:.0f}"

    for r in rows:
        single = final_of(r["rate"], SINGLE)
        met = goal(r, single, typical_compute(rows, r["rate"]))
        lines.append(
            f"| {r['rate']} | {r['label']} | {_num(r.get('sent_mb'), '.1f')} | "
            f"{r['compute_s'] * 1000:.0f} | {r['step_s'] * 1000:.0f} | "
            f"{r['step_s'] / r['compute_s']:.2f} | {r['wait_s'] * 1000:.0f} | "
            f"{r['alone_s'] * 1000:.0f} | {_num(r['hidden'], '.0%')} | {r['steps_s']:.2f} | "
            f"{r['run_steps_s']:.2f} | {r['final_ce']:.3f} | "
            f"{_num(single and r['final_ce'] / single, '.3f')} | {r['final_s']:.0f} | "
            f"{reached(r, single and GOAL_CE * single)} | "
            f"{reached(r, final_of(r['rate'], 'ssgd'))} | "
            f"{reached(r, final_of(r['rate'], 'adpsgd-random'))} | "
            f"{reached(r, args.target_ce)} | {'-' if met is None else 'met' if met else 'no'} |")
    figure_name = Path(args.publish or generated(__file__)).with_suffix(".png").name
    lines += ["", *verdict(rows), "", f"![outer optimizers on a slow link]({figure_name})"]
    return lines


def _loads(rows: list[dict]) -> str:
    loads = [r["load"] for r in rows if "load" in r]
    if not loads:
        return "1-minute load average not recorded"
    return f"1-minute load average {min(loads):.1f} to {max(loads):.1f} at the runs' starts"


def _num(x: float | None, fmt: str) -> str:
    return "-" if x is None else format(x, fmt)


def typical_compute(rows: list[dict], rate: str) -> float:
    """The median compute of the multi-learner rows at ``rate``: the goal's reference, as
    every one of them computes the same model at the same batch. A row's own figure is its 7
    steps timed just before its run, and one load spike there (466 ms against 335-369 ms
    for the rest, in the first 100 Mbit run of this version) would grant it the goal."""
    return statistics.median(r["compute_s"] for r in rows
                             if r["rate"] == rate and r["learners"] > 1)


def goal(r: dict, single_ce: float | None, compute_s: float) -> bool | None:
    """Whether row ``r`` (a method on the link) meets the goal: a final CE within 2 % of the
    single learner's and a step of at most 1.1x ``compute_s`` (:func:`typical_compute`);
    None for the single learner itself or without one."""
    if single_ce is None or r["learners"] == 1:
        return None
    return r["final_ce"] <= GOAL_CE * single_ce and r["step_s"] <= GOAL_STEP * compute_s


def verdict(rows: list[dict]) -> list[str]:
    """Per rate, the goal's verdict in a line: the methods that meet it, else the nearest on
    each side (the best CE among steps <= 1.1x compute, the fastest step among CEs within
    2 %)."""
    out = []
    for rate in dict.fromkeys(r["rate"] for r in rows):
        sel = [r for r in rows if r["rate"] == rate]
        single = next((r["final_ce"] for r in sel if r["learners"] == 1), None)
        if single is None:
            continue
        compute = typical_compute(rows, rate)
        head = (f"Goal at {rate} (final CE <= {GOAL_CE:g} x the {SINGLE}'s {single:.3f} = "
                f"{GOAL_CE * single:.3f}, step <= {GOAL_STEP:g}x the median compute "
                f"{compute * 1000:.0f} ms = {GOAL_STEP * compute * 1000:.0f} ms): ")
        met = [r["label"] for r in sel if goal(r, single, compute)]
        if met:
            out.append(head + "met by " + ", ".join(met) + ".")
            continue
        multi = [r for r in sel if r["learners"] > 1]
        fast = [r for r in multi if r["step_s"] <= GOAL_STEP * compute]
        good = [r for r in multi if r["final_ce"] <= GOAL_CE * single]
        near = []
        if fast:
            b = min(fast, key=lambda r: r["final_ce"])
            near.append(f"the best CE at a step <= {GOAL_STEP:g}x compute is {b['label']}'s "
                        f"{b['final_ce']:.3f}")
        if good:
            b = min(good, key=lambda r: r["step_s"])
            near.append(f"the fastest step within 2 % is {b['label']}'s "
                        f"{b['step_s'] * 1000:.0f} ms, {b['step_s'] / compute:.2f}x")
        out.append(head + "met by none" + ("; " + "; ".join(near) if near else "") + ".")
    return out


if __name__ == "__main__":
    main()
