"""The strategies of issue 34 side by side in the simulator: ssgd, adpsgd-random, hadpsgd,
bmuf, diloco, streaming-diloco and diloco-async, each with and without int8 compression, at 16
and 64 learners with and without a 4x straggler, and the K = 1 control (a single learner and
diloco with one learner, at the same global batch); and (grids ``16lost``, ``64lost``, which
:mod:`bench.studies.methods_2026_lost` runs and publishes to a file of its own) the same with a
lost learner beside the straggler, scenario ``straggler:0x4+lost:5@0.5``: learner 5, on another
node than learner 0, is lost for good halfway through its steps.

A thin wrapper over ``asrdist-compare``: one run of it per grid (its runs kept in ``--out``,
so a rerun with the same values only rewrites the tables), whose tables and curves it
publishes with their commands, and the K = 1 control's split of DiLoCo's gain over ssgd into
what the outer optimizer gives (diloco - ssgd at one learner) and what distribution adds.

    .venv/bin/python -m bench.studies.methods_2026 --data recipes/mini/data/train_aug_fbank \\
        --targets recipes/mini/exp/mono_pdf --out exp/methods_2026 --publish
"""

from __future__ import annotations

import argparse
import json
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from asrdist.errors import AsrdistError
from bench.results import GENERATED, publish, publish_option, scrub

# README's asrdist-compare speed model: 100 Mbit between nodes of 4 learners joined by a fast
# link, half of a gradient allreduce behind backward; a step of 16 chunks computes 0.05 s
LINK = ["--jitter", "0.1", "--latency", "0.0005", "--bandwidth", "12.5e6", "--node-size", "4",
        "--node-bandwidth", "1e10", "--overlap", "0.5"]
MODEL = ["--layers", "1", "--units", "64", "--epochs", "1", "--evals", "8"]
CHUNK_S = 0.05 / 16  # simulated compute per chunk: every grid's global batch costs the same
GLOBAL_BATCH = 256
ASYNC = "diloco-async:diloco_lr=0.35"  # 0.7 was unstable (bench/readings/async_diloco.md)
LOST = "straggler:0x4+lost:5@0.5"  # learner 5 (node 1; learner 0 on node 0) lost halfway
# the lost grids' target CE and budgets: those the published 16 and 64 grids derived from ssgd
# in scenario none (bench/results/methods_2026.md), so their columns read against those tables
# (ssgd, fail-stop, exports nothing in the lost scenario)
LOST_AXES = {16: ("2.431", ["4.09", "8.18", "16.4"]), 64: ("2.436", ["5.32", "10.6", "21.3"])}


def bmuf(learners: int) -> str:
    """bmuf at the outer_methods study's tuned point (eta 0.5, zeta 1/12 at 16 learners, the
    same step at other counts): the default eta = 1 - 1/N diverges at 16."""
    return f"bmuf:bmuf_momentum=0.5,bmuf_lr={0.0833 * 16 / learners:.3g}"


def strategies(learners: int, compress: str, every: bool = True) -> list[str]:
    """The seven strategies (ssgd, the baseline, first), each then with ``compress``, or
    (``every`` false) only the three DiLoCos: on 2 cores a 64-learner run of the others costs
    2-5 minutes, ssgd's compressed mean the most."""
    plain = ["ssgd", "adpsgd-random", "hadpsgd", bmuf(learners), "diloco", "streaming-diloco",
             ASYNC]
    out = []
    for algo in plain:
        out.append(algo)
        if every or algo in ("diloco", "streaming-diloco", ASYNC):
            out.append(f"{algo}{',' if ':' in algo else ':'}compress={compress}")
    return out


def grid(name: str, compress: str) -> dict[str, Any]:
    """One asrdist-compare run: its learners, strategies and scenarios. '16' and '64': all
    strategies (at 64 only the DiLoCos also compressed), none and learner 0 4x slow; 'k1': a
    single learner and diloco with one, at the same global batch (and so the same steps and
    chunks per step) as the others; '16lost' and '64lost': every strategy with and without
    ``compress``, in scenario :data:`LOST` and, as its paired reference (the same seed), in
    straggler:0x4 (at 64 the compressed rows the plain grid leaves out), against the target
    and budgets of the plain grids (:data:`LOST_AXES`)."""
    if name == "k1":
        return {"learners": 1, "algos": ["ssgd", "diloco"], "scenarios": ["none"]}
    if name in ("16lost", "64lost"):
        n = int(name[:2])
        algos = strategies(n, compress)
        target, budgets = LOST_AXES[n]
        return {"learners": n, "algos": algos, "scenarios": [LOST, "straggler:0x4"],
                "axes": ["--target-ce", target, *(x for b in budgets for x in ("--budget", b))]}
    if name in ("16", "64"):
        n = int(name)
        return {"learners": n, "algos": strategies(n, compress, every=n == 16),
                "scenarios": ["none", "straggler:0x4"]}
    raise AsrdistError(f"bench.studies.methods_2026: --grids {name!r}: one of 16, 64, k1, "
                       "16lost, 64lost")


def command(name: str, data: str, targets: str, out: Path, seeds: int,
            compress: str) -> list[str]:
    """asrdist-compare's arguments for grid ``name``: the global batch of 256 chunks split
    over its learners, each step's compute in proportion to its chunks."""
    g = grid(name, compress)
    batch = GLOBAL_BATCH // g["learners"]
    args = ["--data", data, "--targets", targets, "--out", str(out / name),
            "--learners", str(g["learners"]), "--seeds", str(seeds)]
    for algo in g["algos"]:
        args += ["--algo", algo]
    for scenario in g["scenarios"]:
        args += ["--scenario", scenario]
    return [*args, "--batch-size", str(batch), *MODEL, "--compute-s", f"{CHUNK_S * batch:g}",
            *LINK, *g.get("axes", [])]


def split(k1: list[dict], multi: list[dict]) -> list[str]:
    """The K = 1 control's lines: DiLoCo's gain over ssgd at N learners (scenario none), the
    part the outer optimizer gives at one learner, and the rest (distribution)."""
    def ce(rows: list[dict], algo: str) -> float | None:
        return next((r["final_ce"] for r in rows
                     if r["strategy"] == algo and r["scenario"] == "none"), None)

    s1, d1, sn, dn = ce(k1, "ssgd"), ce(k1, "diloco"), ce(multi, "ssgd"), ce(multi, "diloco")
    if None in (s1, d1, sn, dn):
        return []
    return [f"K = 1 control (final CE, scenario none, means over seeds): ssgd {sn:.4f} and "
            f"diloco {dn:.4f} at N learners (diloco - ssgd {dn - sn:+.4f}); a single learner "
            f"{s1:.4f} and diloco with one learner {d1:.4f} (the outer optimizer alone: "
            f"{d1 - s1:+.4f}); what distribution adds to diloco's own: diloco(N) - diloco(1) "
            f"{dn - d1:+.4f}."]


def loss_cost(rows: list[dict]) -> list[str]:
    """The lost learner's cost per strategy: its final CE and end time in scenario
    :data:`LOST` against straggler:0x4 (the same seeds), or where the run failed."""
    by = {(r["strategy"], r["scenario"]): r for r in rows}
    out = []
    for (strategy, scenario), lost in by.items():
        ref = by.get((strategy, "straggler:0x4"))
        if scenario != LOST or ref is None:
            continue
        if lost["failed"]:
            out.append(f"- {strategy}: failed at {lost['failed_at_s']:.4g} s (without the "
                       f"loss: final CE {ref['final_ce']:.4f} at {ref['end_time_s']:.4g} s)")
        else:
            out.append(f"- {strategy}: final CE {lost['final_ce']:.4f} against "
                       f"{ref['final_ce']:.4f} without the loss "
                       f"({lost['final_ce'] - ref['final_ce']:+.4f}), time to target "
                       f"{_seconds(lost['time_to_target_s'])} against "
                       f"{_seconds(ref['time_to_target_s'])}, ending at "
                       f"{lost['end_time_s']:.4g} s against {ref['end_time_s']:.4g} s")
    return out


def _seconds(value: float | None) -> str:
    return "never" if value is None else f"{value:.4g} s"


def parser(description: str, grids: list[str], seeds: list[int]) -> argparse.ArgumentParser:
    """The study's options, its grids and seeds defaulting to ``grids`` and ``seeds`` (the
    caller adds --publish: its own script's file)."""
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--data", required=True, help="Kaldi data dir (the mini corpus's)")
    ap.add_argument("--targets", required=True, help="ingested alignment dir")
    ap.add_argument("--out", required=True, type=Path, help="the runs (kept between reruns)")
    ap.add_argument("--grids", nargs="+", default=grids)
    ap.add_argument("--seeds", nargs="+", type=int, default=seeds,
                    help="seeds per grid, in --grids' order")
    ap.add_argument("--compress", default="int8", help="the compressed rows' codec")
    return ap


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = parser(__doc__.splitlines()[0], ["16", "64", "k1"], [2, 1, 3])
    publish_option(ap, __file__)
    return checked(ap.parse_args(argv))


def checked(args: argparse.Namespace) -> argparse.Namespace:
    """``args`` once its grids and seeds are known good."""
    if len(args.seeds) != len(args.grids) or min(args.seeds) < 1:
        raise AsrdistError(f"bench.studies.methods_2026: --seeds {args.seeds}: one count >= 1 "
                           f"per grid of --grids {args.grids}")
    for name in args.grids:
        grid(name, args.compress)
    return args


def main(args: argparse.Namespace | None = None, module: str = "bench.studies.methods_2026",
         make: str = "methods-2026") -> None:
    """Run the grids of ``args`` (default: this script's command line) and publish them as
    the section of ``module``'s command (``make`` its Makefile target)."""
    args = args or parse_args()
    lines = ["## The strategies side by side in the simulator (issue 34 item 5)", "",
             "The mini corpus, a 1 x 64 BLSTM (0.31 MB), one epoch at a global batch of "
             f"{GLOBAL_BATCH} chunks (180 steps at every learner count), lr 0.1 at that batch, "
             f"a chunk's compute {CHUNK_S * 1000:g} ms simulated; asrdist-compare's README "
             "speed model (100 Mbit = 12.5 MB/s and 0.5 ms across nodes of 4 learners, a fast "
             "link inside them, half of a gradient allreduce behind backward, 10 % jitter). "
             "Scenario straggler:0x4: learner 0 computes 4x slower. The baseline is ssgd; its "
             "final CE + 2 % in scenario none is the target whose time is tabled. bmuf at the "
             "outer_methods study's tuned point, diloco-async at outer lr 0.35, the others at "
             "their defaults (H = 8). Host times: 2 CPU cores shared with other jobs.", ""]
    lost = [name for name in args.grids if name.endswith("lost")]
    if lost:
        lines += [f"Scenario {LOST}: learner 0 computes 4x slower and learner 5 (node 1, "
                  "learner 0 is on node 0) is lost for good after half of its steps, as a "
                  "killed process: the elastic strategies (adpsgd-random, hadpsgd, whose node 1 "
                  "then leaves whole, and diloco-async, whose host is learner 0) drop it and go "
                  "on, the fail-stop ones (ssgd, bmuf, diloco, streaming-diloco) end there: "
                  "their rows say when they failed, with no exported model. Scenario "
                  "straggler:0x4 is run beside it with the same seed, the loss's paired "
                  "reference. The target CE and the budgets are those of the grid of the same "
                  "learners without a lost learner (ssgd, the baseline, exports nothing in the "
                  "lost scenario).", ""]
    lines += [f"Command: `.venv/bin/python -m {module} --data {args.data} "
              f"--targets {args.targets} --out {args.out} --grids {' '.join(args.grids)} "
              f"--seeds {' '.join(map(str, args.seeds))} --compress {args.compress} "
              f"--publish` (`make {make}`), which runs:", ""]
    reports: dict[str, list[dict]] = {}
    for name, seeds in zip(args.grids, args.seeds, strict=True):
        argv = command(name, args.data, args.targets, args.out, seeds, args.compress)
        print(f"-- grid {name}: asrdist-compare {shlex.join(argv)}", file=sys.stderr,
              flush=True)
        subprocess.run([sys.executable, "-m", "asrdist.cli.compare", *argv], check=True,
                       stdout=subprocess.DEVNULL)
        out = args.out / name
        reports[name] = json.loads((out / "compare.json").read_text())["rows"]
        png = GENERATED / f"methods_2026_{name}.png"
        if args.publish:
            shutil.copyfile(out / "curves.png", png)
        g = grid(name, args.compress)
        lines += [f"### {g['learners']} learner{'s' if g['learners'] > 1 else ''}"
                  f"{', a lost learner' if name.endswith('lost') else ''} "
                  f"({seeds} seed{'s' if seeds > 1 else ''})", "",
                  "    asrdist-compare " + shlex.join(argv), "",
                  (out / "table.md").read_text().rstrip("\n"), "",
                  f"![held-out CE against steps and simulated time]({png.name})", ""]
        cost = loss_cost(reports[name]) if name.endswith("lost") else []
        if cost:
            lines += [f"What losing learner 5 cost at {g['learners']} learners (scenario "
                      f"{LOST} against straggler:0x4, the same seed{'s' if seeds > 1 else ''}):",
                      "", *cost, ""]
    if "k1" in reports:
        for name in ("16", "64"):
            if name in reports:
                lines += [f"{name} learners. " + line for line in split(reports["k1"],
                                                                        reports[name])]
                lines.append("")
    publish(scrub(lines, {args.out: "OUT", args.data: "DATA", args.targets: "TARGETS"}),
            args.publish)


if __name__ == "__main__":
    main()
