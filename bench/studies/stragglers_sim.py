"""Study 2 at scale: stragglers among 16 and 64 simulated learners.

The real-process half (:mod:`bench.studies.stragglers`, 4 learners) cannot go past the cores
of this machine; here the many-learner simulator runs every strategy with one learner, and
with an eighth of the learners, slowed 2x and 4x. Every learner takes the same number of steps
(equal shards, as the trainer deals them), so every run ends at the straggler's pace; what the
study compares is how fast the others make progress meanwhile:

- progress rate: learner-steps per simulated second until half of all steps are done,
  relative to the same strategy with no straggler;
- held-out CE of the learners' mean at the time the strategy finishes with no straggler, and
  at the end of the run.

The global batch is the same at every learner count (chunks per learner = global / N), so the
runs see the same number of updates per epoch.

    .venv/bin/python -m bench.studies.stragglers_sim --data DIR --targets DIR --max-utts 400 \
        --publish
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from asrdist.simulate.cache import RunCache
from asrdist.simulate.report import model_size
from asrdist.simulate.speed import SpeedModel
from asrdist.simulate.table import final_ce
from bench.results import generated, publish, publish_option
from bench.studies import figure
from bench.studies.common import (
    STUDY_DEFAULTS,
    corpus_options,
    study_runs,
    study_spec,
)

STRATEGIES = ("ssgd", "adpsgd-fixed", "adpsgd-random", "adpsgd-delay1", "hadpsgd", "ma")
FACTORS = (2.0, 4.0)
# forward+backward 1 s, optimizer and data 0.25 s, a message 10 ms of latency; the bandwidth
# is set so that moving the model once takes SEND_S (a pairwise swap: 0.01 + 0.5 s)
BASE = {"compute_s": 1.0, "update_s": 0.25, "latency_s": 0.01}
SEND_S = 0.5
OPTIONS = {"hadpsgd": {"learners_per_node": 4}}  # super-learners of 4 GPUs


def scenarios(n: int) -> dict[str, dict[int, float]]:
    """Name -> {learner: slow-down}: none, the last learner, and every eighth learner (spread
    over hadpsgd's groups and both sides of the ADPSGD ring)."""
    out: dict[str, dict[int, float]] = {"none": {}}
    for f in FACTORS:
        out[f"1 learner {f:g}x"] = {n - 1: f}
        out[f"{n // 8} learners {f:g}x"] = {i: f for i in range(3, n, 8)}
    return out


def ce_at(records: list[dict[str, Any]], t: float) -> float:
    """Held-out CE of the last evaluation at or before simulated time ``t``."""
    before = [r for r in records if r["time_s"] <= t + 1e-9]
    return (before or records[:1])[-1]["heldout_ce"]


def progress_rate(records: list[dict[str, Any]], learners: int) -> float:
    """Learner-steps per simulated second until half of all steps were done."""
    total = records[-1]["steps"]
    half = next(r for r in records if r["steps"] >= total / 2)
    return half["steps"] * learners / half["time_s"]


def plot(rows: list[dict[str, Any]], path: Path) -> None:
    panels = [(n, sc) for n in dict.fromkeys(r["n"] for r in rows)
              for sc in dict.fromkeys(r["scenario"] for r in rows if r["n"] == n)
              if sc != "none" and sc.endswith("4x")]
    fig, axes = figure.panels(len(panels), 3.6, 3.4)
    for ax, (n, sc) in zip(axes, panels, strict=True):
        figure.curves(ax, f"{n} learners, {sc}", "simulated time (s)", [
            (r["algo"], [x["time_s"] for x in r["records"]],
             [x["heldout_ce"] for x in r["records"]])
            for r in rows if r["n"] == n and r["scenario"] == sc], marker=".")
    figure.save(fig, axes, "held-out CE (learners' mean)", path)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    corpus_options(ap)
    ap.add_argument("--learners", type=int, nargs="+", default=[16, 64])
    ap.add_argument("--global-batch", type=int, default=256, help="chunks per step, all learners")
    ap.add_argument("--epochs", type=float, default=1.0)
    ap.add_argument("--lr", type=float, default=0.1, help="at the global batch (linear rule)")
    ap.add_argument("--evals", type=int, default=8)
    publish_option(ap, __file__)
    args = ap.parse_args()
    runner = study_runs(args.data, args.targets, args.cache, args.max_utts)
    bandwidth = model_size(runner.pool, STUDY_DEFAULTS)["bytes"] / SEND_S
    rows: list[dict[str, Any]] = []
    for n in args.learners:
        for algo in STRATEGIES:
            for name, slow in scenarios(n).items():
                spec = study_spec(algo=algo, learners=n, batch_size=args.global_batch // n,
                                  epochs=args.epochs, lr=args.lr, evals=args.evals,
                                  options=OPTIONS.get(algo, {}))
                res = runner(spec, SpeedModel(slow=slow, bandwidth=bandwidth, **BASE))
                rows.append({"n": n, "algo": algo, "scenario": name, "records": res["records"],
                             "time_s": res["summary"]["time_s"], "ce": final_ce(res)})
                print(n, algo, name, round(rows[-1]["time_s"]), round(rows[-1]["ce"], 4),
                      flush=True)
    plot(rows, generated(__file__, ".png"))
    publish(section(args, rows, runner), args.publish)


def section(args: argparse.Namespace, rows: list[dict[str, Any]], runner: RunCache) -> list[str]:
    base = {(r["n"], r["algo"]): r for r in rows if r["scenario"] == "none"}
    cmd = (f".venv/bin/python -m bench.studies.stragglers_sim --data DATA --targets TARGETS "
           f"--max-utts {args.max_utts} --learners {' '.join(map(str, args.learners))} "
           f"--global-batch {args.global_batch} --epochs {args.epochs:g} --publish")
    lines = [
        "## Study 2 at scale: stragglers among 16-64 simulated learners", "",
        f"Command: `{cmd}` (DATA, TARGETS: the mini recipe's train_fbank and mono_pdf). "
        f"{len(runner.pool.train)} training chunks, a {STUDY_DEFAULTS.model.layers}x"
        f"{STUDY_DEFAULTS.model.units} BLSTM, global batch {args.global_batch} chunks (split "
        "over the "
        f"learners), lr {args.lr:g}, momentum 0.9, {args.epochs:g} epoch(s). Speed model: "
        f"forward+backward {BASE['compute_s']} s, optimizer+data {BASE['update_s']} s, "
        f"{BASE['latency_s']} s latency per message and a bandwidth that moves the model once "
        f"in {SEND_S} s (alpha-beta model: a pairwise swap {BASE['latency_s'] + SEND_S:g} s, a "
        "ring allreduce of N learners 2(N-1) latencies + 2(N-1)/N model transfers); "
        "hadpsgd's super-learners are 4 learners; slowed learners' forward+backward "
        "2x or 4x. Progress = learner-steps per simulated second until half of all steps "
        "were done, relative to the same strategy without stragglers; 'CE at T0' is the "
        "held-out CE of the learners' mean at the simulated time the same strategy "
        f"finished without stragglers. Host time {runner.host_s:.0f} s (runs not cached) on "
        "the shared 2-core machine. Plot: `bench/results/stragglers_sim.png` (4x scenarios).",
        "",
        "| learners | strategy | stragglers | progress | relative | CE at T0 | finish (sim s) "
        "| final CE |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        ref = base[(r["n"], r["algo"])]
        rate = progress_rate(r["records"], r["n"])
        rel = rate / progress_rate(ref["records"], r["n"])
        lines.append(f"| {r['n']} | {r['algo']} | {r['scenario']} | {rate:.1f} | {rel:.2f} | "
                     f"{ce_at(r['records'], ref['time_s']):.4f} | {r['time_s']:.0f} | "
                     f"{r['ce']:.4f} |")
    lines += ["", "![held-out CE against simulated time](stragglers_sim.png)"]
    return lines


if __name__ == "__main__":
    main()
