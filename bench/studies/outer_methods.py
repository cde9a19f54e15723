"""Study 4: communication-light methods (ma, bmuf, diloco) against ADPSGD and ssgd on a slow
link: held-out CE against simulated time, 16 and 64 simulated learners at one global batch.

The clock is a paper-size run's: a chunk costs what the paper-size BLSTM's chunk costs on a V100
(21 frames x 53 us, the projection's calibrated figure), and every message carries the
paper-size model's 173 MB over the link (the simulator's bandwidth is scaled by the small
model's bytes over 173 MB, so its messages take the paper-size model's time); the weights that
train are the studies' small BLSTM. Links: the network study's 1 Gbit/s and 100 Mbit/s, 0.1 ms
latency per message. Learning rate: ``--lr`` at every step on every learner (RunSpec with no
schedule: not scaled, no decay; bmuf also at ``--lr`` / N), momentum 0.9, grad clip 5
(RunSpec's); the outer optimizers at their defaults (bmuf: eta = 1 - 1/N, zeta 1, Nesterov;
diloco: outer lr 0.7, Nesterov 0.9).

    .venv/bin/python -m bench.studies.outer_methods --data DIR --targets DIR
        [--cache DIR] [--max-utts N] [--epochs E] [--ma-periods H ...] [--out bench/RESULTS.md]
"""

from __future__ import annotations

import argparse
import statistics
from typing import Any

from asrdist.models.build import build_model
from asrdist.simulate.experiment import RunSpec
from asrdist.simulate.speed import SpeedModel
from bench.results import publish
from bench.studies.common import REPO, Runner, corpus_options, final_ce, small_blstm
from bench.studies.figure import curves, panels, write_png

PAPER_BYTES = 173e6  # the paper-size BLSTM's float32 weights (43.2 M parameters)
FRAME_S = 53e-6  # its calibrated V100 forward+backward per training frame (bench.projection)
LINKS = {"1gbit": 1e9 / 8, "100mbit": 100e6 / 8}  # bytes/s, the network study's tc rates
LATENCY_S = 1e-4
PERIODIC = ("ma", "bmuf", "diloco")  # the strategies that take --avg-period
MARGINS = (1.02, 1.15)  # the targets: ssgd's final held-out CE times these
BASELINES = {"ssgd": {}, "adpsgd-random": {},
             "hadpsgd": {"learners_per_node": 4, "hadpsgd_variant": "random"}}


def methods(periods: dict[str, list[int]]) -> dict[str, tuple[str, dict, bool]]:
    """Label -> (algo, options, lr over the learners): the baselines, then ma, bmuf and diloco
    at each H of theirs in ``periods``. bmuf runs twice: at ``--lr`` and at
    ``--lr`` / N, since at its default filter (eta = 1 - 1/N, zeta 1) it steps N times the
    learners' mean update, their sum, as if every learner's rate were N times larger."""
    out = {name: (name, opts, False) for name, opts in BASELINES.items()}
    for algo in PERIODIC:
        for h in periods[algo]:
            out[f"{algo} H={h}"] = (algo, {"avg_period": h}, False)
            if algo == "bmuf":
                out[f"bmuf H={h} lr/N"] = (algo, {"avg_period": h}, True)
    return out


def speed_model(link_bytes_s: float, small_bytes: int, chunks_per_step: int,
                chunk_len: int) -> SpeedModel:
    """The paper-size clock for the small model: its messages last as long as 173 MB's."""
    return SpeedModel(compute_s=chunks_per_step * chunk_len * FRAME_S, latency_s=LATENCY_S,
                      bandwidth=link_bytes_s * small_bytes / PAPER_BYTES)


def time_to(records: list[dict[str, Any]], ce: float) -> float | None:
    """Simulated seconds of the first evaluation at or below ``ce`` (None: never)."""
    return next((r["time_s"] for r in records if r["heldout_ce"] <= ce), None)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    corpus_options(ap)
    ap.add_argument("--epochs", type=float, default=1.0)
    ap.add_argument("--global-batch", type=int, default=256)
    ap.add_argument("--learners", type=int, nargs="+", default=[16, 64])
    for algo, default in (("ma", [10, 50, 200]), ("bmuf", [10]), ("diloco", [10, 50, 200])):
        ap.add_argument(f"--{algo}-periods", type=int, nargs="+", default=default,
                        help=f"H: local steps between averages of {algo}")
    ap.add_argument("--links", nargs="+", default=list(LINKS), choices=LINKS)
    ap.add_argument("--lr", type=float, default=0.1)
    ap.add_argument("--evals", type=int, default=12, help="held-out evaluations per run")
    ap.add_argument("--seeds", type=int, default=1,
                    help="seeds of --seed-methods, on the last link (final CE: mean, sd)")
    ap.add_argument("--seed-methods", nargs="+",
                    default=["ssgd", "adpsgd-random", "ma H=10", "diloco H=10"])
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    periods = {algo: getattr(args, f"{algo}_periods") for algo in PERIODIC}
    unknown = sorted(set(args.seed_methods) - set(methods(periods)))
    if unknown:
        ap.error(f"--seed-methods: {', '.join(unknown)} not among the methods run")
    runner = Runner(args.data, args.targets, args.cache, args.max_utts)
    model = small_blstm()
    net = build_model(model, runner.pool.input_dim, runner.pool.num_pdfs)
    small_bytes = 4 * sum(p.numel() for p in net.parameters())
    rows, host = [], 0.0
    for link in args.links:
        for n in args.learners:
            batch = args.global_batch // n
            speed = speed_model(LINKS[link], small_bytes, batch, runner.pool.chunk_len)
            for label, (algo, opts, over_n) in methods(periods).items():
                lr = args.lr / n if over_n else args.lr
                spec = RunSpec(algo, n, batch, args.epochs, lr, 0.9, model=model,
                               options=opts, evals=args.evals)
                res = runner(spec, speed)
                rows.append({"link": link, "n": n, "label": label, "records": res["records"]})
                host += res["host_s"]
                print(link, n, label, round(final_ce(res), 4),
                      round(res["records"][-1]["time_s"], 1), flush=True)
    spread = {}
    link = args.links[-1]
    for n in args.learners:
        speed = speed_model(LINKS[link], small_bytes, args.global_batch // n,
                            runner.pool.chunk_len)
        for label in args.seed_methods if args.seeds > 1 else []:
            algo, opts, over_n = methods(periods)[label]
            ces = []
            for seed in range(args.seeds):
                spec = RunSpec(algo, n, args.global_batch // n, args.epochs,
                               args.lr / n if over_n else args.lr, 0.9, model=model,
                               options=opts, evals=args.evals, seed=seed)
                res = runner(spec, speed)
                ces.append(final_ce(res))
                host += res["host_s"] if seed else 0.0
            spread[n, label] = ces
            print(link, n, label, "seeds", [round(c, 4) for c in ces], flush=True)
    plot(rows, args, REPO / "bench/studies/outer_methods.png")
    publish(section(args, rows, runner, small_bytes, host, spread), args.out)


def plot(rows: list[dict[str, Any]], args: argparse.Namespace, path: Any) -> None:
    from matplotlib import cm

    keys = [(link, n) for link in args.links for n in args.learners]
    fig, axes = panels(len(keys), 4.5, 4)
    for ax, (link, n) in zip(axes, keys, strict=True):
        series = [(r["label"], [x["time_s"] for x in r["records"]],
                   [x["heldout_ce"] for x in r["records"]])
                  for r in rows if (r["link"], r["n"]) == (link, n)]
        ax.set_prop_cycle(color=[cm.tab20(i) for i in range(0, 20, 2)] + [cm.tab20(1), "k"])
        curves(ax, f"{n} learners, {link}", "simulated time (s, log)", series, marker=".")
        ax.set_xscale("log")
    axes[0].set_ylabel("held-out CE")
    axes[-1].legend(fontsize=6)
    write_png(fig, path)


def section(args: argparse.Namespace, rows: list[dict[str, Any]], runner: Runner,
            small_bytes: int, host: float, spread: dict[tuple[int, str], list[float]]
            ) -> list[str]:
    lines = [
        "## Study 4: communication-light methods on a slow link (simulator)",
        "",
        "Command: `.venv/bin/python -m bench.studies.outer_methods --data DATA --targets TARGETS "
        f"--max-utts {args.max_utts} --epochs {args.epochs:g} --global-batch {args.global_batch} "
        f"--learners {' '.join(map(str, args.learners))} "
        + "".join(f"--{a}-periods {' '.join(map(str, getattr(args, f'{a}_periods')))} "
                  for a in PERIODIC)
        + f"--links {' '.join(args.links)} "
        f"--lr {args.lr:g} --evals {args.evals} --seeds {args.seeds} --hours {args.hours} "
        "--cache DIR --out bench/RESULTS.md` "
        f"(`recipes/mini/run.sh --stop-stage 3 --hours {args.hours}`). "
        f"{len(runner.pool.train)} training chunks of {runner.pool.chunk_len} frames, 100 "
        f"held-out utterances, a {small_blstm().layers}x{small_blstm().units} BLSTM "
        f"({small_bytes / 1e3:.0f} kB), {args.epochs:g} epoch(s) at global batch "
        f"{args.global_batch} chunks, seed 0"
        + (f" ({args.seeds} seeds in the last table)" if args.seeds > 1 else "")
        + f". lr {args.lr:g} at every step (no scaling, no "
        "decay; bmuf also at lr / N), momentum 0.9, grad clip 5; bmuf and diloco at their "
        "default outer optimizers; "
        "hadpsgd super-learners of 4, random ring. Clock: a chunk costs the paper-size BLSTM's "
        f"V100 time ({FRAME_S * 1e6:.0f} us/frame), a message the time of {PAPER_BYTES / 1e6:.0f}"
        f" MB over the link plus {LATENCY_S * 1e3:g} ms (see the module's docstring). Plot: "
        f"`bench/studies/outer_methods.png`. Host time {host:.0f} s summed over the "
        f"{len(rows) + sum(len(c) - 1 for c in spread.values())} runs (each on one thread; this "
        "pass computed "
        f"{runner.host_s:.0f} s, the rest came from the cache) on the shared 2-core machine.",
        "",
        "Targets: ssgd's final CE of that link and learner count plus 2 % and plus 15 %; "
        "'time to' is the simulated time of the first held-out evaluation at or below the target "
        f"({args.evals} evaluations a run, so it is rounded up to the next one; '-': never "
        "reached). Every evaluation is of the learners' mean weights.",
        "",
        "| link | learners | method | final CE | simulated time (s) | "
        + " | ".join(f"time to ssgd +{round(100 * (m - 1))} % (s)" for m in MARGINS) + " |",
        "|---|---|---|---|---|" + "---|" * len(MARGINS),
    ]
    for link in args.links:
        for n in args.learners:
            group = [r for r in rows if (r["link"], r["n"]) == (link, n)]
            ref = next(r for r in group if r["label"] == "ssgd")["records"][-1]["heldout_ce"]
            for r in group:
                hits = [time_to(r["records"], ref * m) for m in MARGINS]
                lines.append(
                    f"| {link} | {n} | {r['label']} | {r['records'][-1]['heldout_ce']:.4f} | "
                    f"{r['records'][-1]['time_s']:.0f} | "
                    + " | ".join("-" if h is None else f"{h:.0f}" for h in hits) + " |")
    if spread:
        lines += ["", f"Seeds ({args.links[-1]}; the synchronous methods' CE does not depend on "
                  "the link): final held-out CE, mean +- standard deviation", "",
                  "| learners | method | seeds | mean | sd |", "|---|---|---|---|---|"]
        for (n, label), ces in spread.items():
            lines.append(f"| {n} | {label} | {len(ces)} | {statistics.mean(ces):.4f} | "
                         f"{statistics.stdev(ces):.4f} |")
    lines += ["", "![outer methods study](studies/outer_methods.png)"]
    return lines


if __name__ == "__main__":
    main()
