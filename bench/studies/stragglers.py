"""Straggler study with real processes: 4 learners, one or two of them slowed 2x and 4x.

Every learner is a forked process (gloo on 127.0.0.1) running the trainer's step on the
synthetic task of :mod:`bench.studies.learner`, whose sleep-based compute stands in for a GPU
(a slowed learner sleeps ``factor`` times as long). Learner 0 is never slowed and evaluates its
own weights on held-out data every ``--eval-every`` steps: held-out cross-entropy against wall
time. Every learner takes the same number of steps (equal data shards, as the trainer deals
them), so the run ends at the straggler's pace whatever the strategy; what differs is how far
the others get meanwhile. Per run:

- throughput: steps of all learners per second until the first learner finishes;
- learner 0's time to finish its steps and its held-out CE then;
- the wall time until the final average, and that average's held-out CE.

The 16-64-learner half of the study is the simulator's (:mod:`bench.studies.stragglers_sim`).

    .venv/bin/python -m bench.studies.stragglers --steps 100 --publish
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from asrdist.fsutil import atomic_write
from asrdist.testing.learners import launch
from bench.harness import presets
from bench.results import generated, publish, publish_option
from bench.studies import figure, learner

LEARNERS = 4
# name -> {rank: slow-down}; learner 0 (the evaluator) is never slowed. Two slowed learners sit
# one in each of hadpsgd's super-learners (ranks 0-1 and 2-3), and one active (1) and one
# passive (2) on the ADPSGD ring.
SCENARIOS: dict[str, dict[int, float]] = {
    "none": {},
    "1 learner 2x": {3: 2.0},
    "1 learner 4x": {3: 4.0},
    "2 learners 2x": {1: 2.0, 2: 2.0},
    "2 learners 4x": {1: 4.0, 2: 4.0},
}


def summarise(algo: str, scenario: str, results: list[dict], batch: int) -> dict[str, Any]:
    """The figures of one run (see the module docstring)."""
    first = min(r["done_s"] for r in results)
    steps = sum(sum(1 for t in r["ends"] if t <= first) for r in results)
    lead = results[0]
    return {"algo": algo, "scenario": scenario, "throughput": steps / first,
            "samples_s": steps * batch / first, "lead_done_s": lead["done_s"],
            "lead_ce": lead["evals"][-1][2], "final_s": max(r["final_s"] for r in results),
            "final_ce": lead["final_ce"], "curve": [(t, ce) for t, _, ce in lead["evals"]]}


def plot(rows: list[dict], path: Path) -> None:
    scenarios = list(dict.fromkeys(r["scenario"] for r in rows))
    fig, axes = figure.panels(len(scenarios), 3.6, 3.4)
    for ax, sc in zip(axes, scenarios, strict=True):
        runs = [r for r in rows if r["scenario"] == sc]
        lines = figure.curves(ax, f"stragglers: {sc}", "wall time (s)", [
            (r["algo"], [t for t, _ in r["curve"]], [c for _, c in r["curve"]]) for r in runs])
        for r, line in zip(runs, lines, strict=True):
            ax.scatter([r["final_s"]], [r["final_ce"]], color=line.get_color(), marker="*")
    figure.save(fig, axes, "held-out CE (line: learner 0; star: final average)", path)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--sim-compute-ms", type=float, default=40.0)
    ap.add_argument("--eval-every", type=int, default=10)
    ap.add_argument("--only", help="run only the strategies whose name contains this")
    publish_option(ap, __file__)
    args = ap.parse_args()
    rows, loads = [], []
    for algo, options in presets():
        if args.only and args.only not in algo:
            continue
        for name, slow in SCENARIOS.items():
            cfg = learner.Config(algo, args.steps, options, width=256, layers=2, batch=32,
                                 sim_ms=args.sim_compute_ms, slow=slow,
                                 eval_every=args.eval_every, lr=0.05)
            loads.append(os.getloadavg()[0])
            rows.append(summarise(algo, name, launch(learner.run, LEARNERS, cfg), cfg.batch))
            r = rows[-1]
            print(f"{algo:14s} {name:14s} {r['throughput']:6.1f} steps/s  learner 0 done "
                  f"{r['lead_done_s']:5.1f} s CE {r['lead_ce']:.3f}; all {r['final_s']:5.1f} s "
                  f"CE {r['final_ce']:.3f}", file=sys.stderr, flush=True)
    with atomic_write(generated(__file__, ".json")) as f:
        json.dump(rows, f, indent=1)
    plot(rows, generated(__file__, ".png"))
    cmd = (f".venv/bin/python -m bench.studies.stragglers --steps {args.steps} "
           f"--sim-compute-ms {args.sim_compute_ms:g} --eval-every {args.eval_every} "
           "--publish")
    base = {r["algo"]: r["throughput"] for r in rows if r["scenario"] == "none"}
    lines = [
        "## Stragglers with real processes (4 learners)", "",
        f"4 learner processes (CPU, gloo on 127.0.0.1), MLP 2x256 on a synthetic 32-class "
        f"task, batch 32, lr 0.05, {args.steps} steps per learner (few, to fit the time "
        f"budget), {args.sim_compute_ms:g} ms of sleep-based compute per step (a slowed "
        "learner sleeps 2x or 4x as long). Slowed: learner 3 (one), learners 1 and 2 (two: "
        "one per hadpsgd node, one active and one passive on the ring). Throughput = steps of "
        "all learners per second until the first learner finished (relative: to the same "
        "strategy without stragglers); learner 0 (never slowed) evaluates its own weights; "
        "'all done' = wall time until the final average, whose CE is the last column. Every "
        "learner takes the same number of steps, so the run ends at the straggler's pace. "
        f"2 CPU cores shared with other jobs (1-minute load average {min(loads):.1f} to "
        f"{max(loads):.1f} during the runs).", "",
        f"Command: `{cmd}` (`make stragglers`)", "",
        "| strategy | stragglers | steps/s (all) | relative | learner 0 done (s) "
        "| its CE | all done (s) | final CE |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        rel = r["throughput"] / base[r["algo"]] if r["algo"] in base else float("nan")
        lines.append(f"| {r['algo']} | {r['scenario']} | {r['throughput']:.1f} | {rel:.2f} | "
                     f"{r['lead_done_s']:.1f} | {r['lead_ce']:.3f} | {r['final_s']:.1f} | "
                     f"{r['final_ce']:.3f} |")
    lines += ["", "![held-out CE against wall time](stragglers.png)", "",
              "Lines: learner 0's own weights; stars: the final average when every learner "
              "has finished.", "",
              "16-64 learners: \"Study 2 at scale\", `bench/results/stragglers_sim.md` (the "
              "simulator, `bench.studies.stragglers_sim`)."]
    publish(lines, args.publish)


if __name__ == "__main__":
    main()
