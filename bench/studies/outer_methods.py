"""Study 4: communication-light methods (ma, bmuf, diloco) against ADPSGD and ssgd on a slow
link: held-out CE against simulated time, 16 and 64 simulated learners at one global batch.

The clock is a paper-size run's: a chunk costs what the paper-size BLSTM's chunk costs on a V100
(21 frames x 53 us, the projection's calibrated figure), and every message carries the
paper-size model's 173 MB over the link (the simulator's bandwidth is scaled by the small
model's bytes over 173 MB, so its messages take the paper-size model's time); the weights that
train are the studies' small BLSTM. Links: the network study's 1 Gbit/s and 100 Mbit/s, 0.1 ms
latency per message. Learning rate: ``--lr`` at every step on every learner (a constant
rate: not scaled, no decay), momentum 0.9, grad clip 5 (the studies' defaults,
``common.STUDY_DEFAULTS``); diloco's outer optimizer at its defaults (outer lr 0.7, Nesterov
0.9).

bmuf runs untuned at its default filter (eta = 1 - 1/N, zeta 1, Nesterov) at ``--lr`` and at
``--lr`` / N, and over a grid at ``--bmuf-grid-period``, on the last link (a synchronous
method's weights do not depend on the link). The grid sets the filter's settled block step to
ssgd's at ``--lr`` times each multiple (:func:`steady_gain`), either by the inner lr
(``--bmuf-etas`` x ``--bmuf-lr-mults``, zeta 1) or by the block lr zeta (``--bmuf-zeta-etas``
x ``--bmuf-zeta-mults``, inner lr ``--lr``). Its best point per learner count is the "tuned"
row of every link, also run in the classic form and at each H of ``--bmuf-tuned-periods``.

    .venv/bin/python -m bench.studies.outer_methods --data DIR --targets DIR
        [--cache DIR] [--max-utts N] [--epochs E] [--ma-periods H ...] [--publish]
"""

from __future__ import annotations

import argparse
import statistics
from dataclasses import dataclass, replace
from typing import Any

from asrdist.simulate.cache import RunCache
from asrdist.simulate.report import model_size
from asrdist.simulate.speed import SpeedModel
from asrdist.simulate.table import final_ce
from bench.results import generated, publish, publish_option
from bench.studies.common import (
    HADPSGD_NODES_OF_4,
    STUDY_DEFAULTS,
    corpus_options,
    study_runs,
    study_spec,
)
from bench.studies.figure import curves, panels, write_png

PAPER_BYTES = 173e6  # the paper-size BLSTM's float32 weights (43.2 M parameters)
FRAME_S = 53e-6  # its calibrated V100 forward+backward per training frame (bench.projection)
LINKS = {"1gbit": 1e9 / 8, "100mbit": 100e6 / 8}  # bytes/s, the network study's tc rates
LATENCY_S = 1e-4
PERIODIC = ("ma", "bmuf", "diloco")  # the strategies that take --avg-period
PLOT_CE_TOP = 5.0  # the untuned bmuf at --lr diverges above it
MARGINS = (1.02, 1.15)  # the targets: ssgd's final held-out CE times these
BASELINES = {"ssgd": {}, "adpsgd-random": {},
             "hadpsgd": HADPSGD_NODES_OF_4}


def methods(periods: dict[str, list[int]]) -> dict[str, tuple[str, dict, bool]]:
    """Label -> (algo, options, lr over the learners): the baselines, then ma, bmuf and diloco
    at each H of theirs in ``periods``. bmuf, untuned, runs twice: at ``--lr`` and at
    ``--lr`` / N, since at its default filter (eta = 1 - 1/N, zeta 1) it steps N times the
    learners' mean update, their sum, as if every learner's rate were N times larger."""
    out = {name: (name, opts, False) for name, opts in BASELINES.items()}
    for algo in PERIODIC:
        for h in periods[algo]:
            if algo == "bmuf":
                out[f"bmuf H={h} untuned"] = (algo, {"avg_period": h}, False)
                out[f"bmuf H={h} untuned lr/N"] = (algo, {"avg_period": h}, True)
            else:
                out[f"{algo} H={h}"] = (algo, {"avg_period": h}, False)
    return out


DEFAULT_ETA = "1-1/N"  # bmuf's default block momentum, CNTK's


def eta_token(text: str) -> str:
    """A ``--bmuf-etas`` value: a block momentum in [0, 1), or 1-1/N (the default filter's)."""
    if text == DEFAULT_ETA:
        return text
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0.0 <= value < 1.0:
        raise argparse.ArgumentTypeError(f"{text!r}: a block momentum in [0, 1) or {DEFAULT_ETA}")
    return f"{value:g}"


def eta_value(token: str, learners: int) -> float:
    """The block momentum ``token`` stands for with ``learners`` learners."""
    return 1.0 - 1.0 / learners if token == DEFAULT_ETA else float(token)


def steady_gain(learners: int, eta: float, nesterov: bool) -> float:
    """How many times the block's averaged update G bmuf moves the block's start, per block,
    once its momentum has settled under a constant G (zeta 1, asrdist's CNTK scale): v tends
    to N * G whatever eta (v = eta v + (1 - eta) N G), and the start moves by v (classic) or,
    the next block starting from w - eta v, by (1 + eta) v (Nesterov). G over a block is
    about the H steps ssgd would take at the learners' lr (each learner's batch is 1/N of
    ssgd's; their mean update is over all of it), so a settled step equal to ssgd's takes an
    inner lr or a zeta of 1 / gain."""
    return learners * ((1.0 + eta) if nesterov else 1.0)


@dataclass(frozen=True)
class BmufPoint:
    """One bmuf configuration: H, block momentum (a :func:`eta_token`), ``mult``: its settled
    block step as a multiple of ssgd's at the base lr, the Nesterov or the classic form, and
    which knob sets that step: the inner lr (zeta 1, inner lr ``mult`` times the base lr over
    :func:`steady_gain`) or, ``by_zeta``, the block lr zeta (inner lr the base lr, zeta
    ``mult`` over the gain)."""

    period: int
    eta: str
    mult: float
    nesterov: bool = True
    by_zeta: bool = False

    def label(self) -> str:
        form = "" if self.nesterov else " classic"
        knob = "zeta" if self.by_zeta else "lr"
        return f"bmuf H={self.period} eta={self.eta} {knob} x{self.mult:g}{form}"

    def gain(self, learners: int) -> float:
        """:func:`steady_gain` at zeta 1."""
        return steady_gain(learners, eta_value(self.eta, learners), self.nesterov)

    def lr(self, base_lr: float, learners: int) -> float:
        return base_lr if self.by_zeta else self.mult * base_lr / self.gain(learners)

    def zeta(self, learners: int) -> float:
        return self.mult / self.gain(learners) if self.by_zeta else 1.0

    def options(self, learners: int) -> dict[str, Any]:
        """The strategy's options, the defaults left out (so a default point's runs keep the
        untuned rows' cache keys)."""
        out: dict[str, Any] = {"avg_period": self.period}
        if self.eta != DEFAULT_ETA:
            out["bmuf_momentum"] = float(self.eta)
        if self.by_zeta:
            out["bmuf_lr"] = self.zeta(learners)
        if not self.nesterov:
            out["bmuf_nesterov"] = False
        return out


def bmuf_grid(etas: list[str], mults: list[float], period: int,
              by_zeta: bool = False) -> list[BmufPoint]:
    """Every (eta, step multiple) pair at H = ``period``, Nesterov, eta by eta."""
    return [BmufPoint(period, eta, mult, by_zeta=by_zeta) for eta in etas for mult in mults]


def tuned_periods(args: argparse.Namespace) -> list[int]:
    """H of the tuned bmuf rows: the grid's and ``--bmuf-tuned-periods`` (none: no grid)."""
    if not (args.bmuf_etas or args.bmuf_zeta_etas):
        return []
    return [args.bmuf_grid_period, *args.bmuf_tuned_periods]


def best(results: dict[BmufPoint, float]) -> BmufPoint:
    """The point of lowest final CE (the first of equals)."""
    return min(results, key=lambda point: results[point])


def speed_model(link_bytes_s: float, small_bytes: int, chunks_per_step: int,
                chunk_len: int) -> SpeedModel:
    """The paper-size clock for the small model: its messages last as long as 173 MB's."""
    return SpeedModel(compute_s=chunks_per_step * chunk_len * FRAME_S, latency_s=LATENCY_S,
                      bandwidth=link_bytes_s * small_bytes / PAPER_BYTES)


def time_to(records: list[dict[str, Any]], ce: float) -> float | None:
    """Simulated seconds of the first evaluation at or below ``ce`` (None: never)."""
    return next((r["time_s"] for r in records if r["heldout_ce"] <= ce), None)


def positive(text: str) -> float:
    """A ``--bmuf-lr-mults`` value: a number above 0."""
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not value > 0.0:
        raise argparse.ArgumentTypeError(f"{text!r}: a multiple above 0")
    return value


def period(text: str) -> int:
    """A ``--bmuf-grid-period`` or ``--bmuf-tuned-periods`` value: local steps, at least 1."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: a number of local steps, at least 1")
    return value


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    corpus_options(ap)
    ap.add_argument("--epochs", type=float, default=1.0)
    ap.add_argument("--global-batch", type=int, default=256)
    ap.add_argument("--learners", type=int, nargs="+", default=[16, 64])
    for algo, default in (("ma", [10, 50, 200]), ("bmuf", [10]), ("diloco", [10, 50, 200])):
        ap.add_argument(f"--{algo}-periods", type=int, nargs="+", default=default,
                        help=f"H: local steps between averages of {algo}"
                        + (" (untuned: default filter, lr and lr / N)" if algo == "bmuf" else ""))
    ap.add_argument("--bmuf-etas", type=eta_token, nargs="*",
                    default=["0.5", "0.75", DEFAULT_ETA],
                    help=f"the bmuf grid's block momenta, in [0, 1) or {DEFAULT_ETA} "
                    "(none: no grid, no tuned rows)")
    ap.add_argument("--bmuf-lr-mults", type=positive, nargs="+", default=[0.5, 1.0, 2.0],
                    help="the bmuf grid's inner lr (zeta 1), as multiples of the lr whose "
                    "settled block step is ssgd's at --lr")
    ap.add_argument("--bmuf-zeta-etas", type=eta_token, nargs="*", default=["0.5", "0.75"],
                    help="the block momenta of the grid's second part: inner lr --lr, the "
                    "block lr zeta scaled instead")
    ap.add_argument("--bmuf-zeta-mults", type=positive, nargs="+", default=[1.0, 2.0, 4.0],
                    help="its zeta, as multiples of the zeta whose settled block step is "
                    "ssgd's at --lr")
    ap.add_argument("--bmuf-grid-period", type=period, default=10, help="H of the bmuf grid")
    ap.add_argument("--bmuf-tuned-periods", type=period, nargs="*", default=[50],
                    help="other H at which the grid's best point runs")
    ap.add_argument("--links", nargs="+", default=list(LINKS), choices=LINKS)
    ap.add_argument("--lr", type=float, default=0.1)
    ap.add_argument("--evals", type=int, default=12, help="held-out evaluations per run")
    ap.add_argument("--seeds", type=int, default=1,
                    help="seeds of --seed-methods, on the last link (final CE: mean, sd)")
    ap.add_argument("--seed-methods", nargs="+",
                    default=["ssgd", "adpsgd-random", "ma H=10", "diloco H=10",
                             "bmuf H=10 tuned"])
    publish_option(ap, __file__)
    return ap


def main() -> None:
    ap = parser()
    args = ap.parse_args()
    periods = {algo: getattr(args, f"{algo}_periods") for algo in PERIODIC}
    tuned_labels = {f"bmuf H={h} tuned" for h in tuned_periods(args)}
    unknown = sorted(set(args.seed_methods) - set(methods(periods)) - tuned_labels)
    if unknown:
        ap.error(f"--seed-methods: {', '.join(unknown)} not among the methods run")
    runner = study_runs(args.data, args.targets, args.cache, args.max_utts)
    small_bytes = model_size(runner.pool, STUDY_DEFAULTS)["bytes"]
    done: dict[str, float] = {}  # each distinct run (its cache key) -> its host seconds

    def simulate(link: str, n: int, algo: str, lr: float, opts: dict, seed: int = 0
                 ) -> dict[str, Any]:
        batch = args.global_batch // n
        spec = study_spec(algo=algo, learners=n, batch_size=batch, epochs=args.epochs, lr=lr,
                          options=opts, evals=args.evals, seed=seed)
        speed = speed_model(LINKS[link], small_bytes, batch, runner.pool.chunk_len)
        res = runner(spec, speed)
        done[runner.key(spec, speed)] = res["host_s"]
        return res

    grid: dict[int, dict[BmufPoint, dict[str, Any]]] = {}  # on the last link
    tuned: dict[int, BmufPoint] = {}
    for n in args.learners:
        grid[n] = {}
        for point in [*bmuf_grid(args.bmuf_etas, args.bmuf_lr_mults, args.bmuf_grid_period),
                      *bmuf_grid(args.bmuf_zeta_etas, args.bmuf_zeta_mults,
                                 args.bmuf_grid_period, by_zeta=True)]:
            grid[n][point] = simulate(args.links[-1], n, "bmuf", point.lr(args.lr, n),
                                      point.options(n))
            print(args.links[-1], n, point.label(), round(final_ce(grid[n][point]), 4),
                  flush=True)
        if grid[n]:
            tuned[n] = best({point: final_ce(res) for point, res in grid[n].items()})
            classic = replace(tuned[n], nesterov=False)
            grid[n][classic] = simulate(args.links[-1], n, "bmuf", classic.lr(args.lr, n),
                                        classic.options(n))
            print(args.links[-1], n, classic.label(), round(final_ce(grid[n][classic]), 4),
                  flush=True)
    def runs_of(n: int) -> dict[str, tuple[str, float, dict]]:
        """Label -> (algo, lr, options) of the table's rows for ``n`` learners."""
        out = {label: (algo, args.lr / n if over_n else args.lr, opts)
               for label, (algo, opts, over_n) in methods(periods).items()}
        for h in tuned_periods(args):
            point = replace(tuned[n], period=h)
            out[f"bmuf H={h} tuned"] = ("bmuf", point.lr(args.lr, n), point.options(n))
        return out

    rows = []
    for link in args.links:
        for n in args.learners:
            for label, (algo, lr, opts) in runs_of(n).items():
                res = simulate(link, n, algo, lr, opts)
                rows.append({"link": link, "n": n, "label": label, "records": res["records"]})
                print(link, n, label, round(final_ce(res), 4),
                      round(res["records"][-1]["time_s"], 1), flush=True)
    spread = {}
    for n in args.learners:
        for label in args.seed_methods if args.seeds > 1 else []:
            algo, lr, opts = runs_of(n)[label]
            ces = [final_ce(simulate(args.links[-1], n, algo, lr, opts, seed))
                   for seed in range(args.seeds)]
            spread[n, label] = ces
            print(args.links[-1], n, label, "seeds", [round(c, 4) for c in ces], flush=True)
    plot(rows, args, generated(__file__, ".png"))
    publish(section(args, rows, runner, small_bytes, done, spread, grid, tuned),
            args.publish)


def plot(rows: list[dict[str, Any]], args: argparse.Namespace, path: Any) -> None:
    from matplotlib import cm

    keys = [(link, n) for link in args.links for n in args.learners]
    fig, axes = panels(len(keys), 4.5, 4)
    for ax, (link, n) in zip(axes, keys, strict=True):
        series = [(r["label"], [x["time_s"] for x in r["records"]],
                   [x["heldout_ce"] for x in r["records"]])
                  for r in rows if (r["link"], r["n"]) == (link, n)]
        ax.set_prop_cycle(color=[cm.tab20(i) for i in [*range(0, 20, 2), *range(1, 20, 2)]])
        curves(ax, f"{n} learners, {link}", "simulated time (s, log)", series, marker=".")
        ax.set_xscale("log")
        ax.set_ylim(top=PLOT_CE_TOP)
    axes[0].set_ylabel("held-out CE")
    axes[-1].legend(fontsize=6)
    write_png(fig, path)


def section(args: argparse.Namespace, rows: list[dict[str, Any]], runner: RunCache,
            small_bytes: int, done: dict[str, float],
            spread: dict[tuple[int, str], list[float]],
            grid: dict[int, dict[BmufPoint, dict[str, Any]]], tuned: dict[int, BmufPoint]
            ) -> list[str]:
    lines = [
        "## Study 4: communication-light methods on a slow link (simulator)",
        "",
        "Command: `.venv/bin/python -m bench.studies.outer_methods --data DATA --targets TARGETS "
        f"--max-utts {args.max_utts} --epochs {args.epochs:g} --global-batch {args.global_batch} "
        f"--learners {' '.join(map(str, args.learners))} "
        + "".join(f"--{a}-periods {' '.join(map(str, getattr(args, f'{a}_periods')))} "
                  for a in PERIODIC)
        + f"--bmuf-etas {' '.join(args.bmuf_etas)} "
        f"--bmuf-lr-mults {' '.join(f'{m:g}' for m in args.bmuf_lr_mults)} "
        f"--bmuf-zeta-etas {' '.join(args.bmuf_zeta_etas)} "
        f"--bmuf-zeta-mults {' '.join(f'{m:g}' for m in args.bmuf_zeta_mults)} "
        f"--bmuf-grid-period {args.bmuf_grid_period} "
        f"--bmuf-tuned-periods {' '.join(map(str, args.bmuf_tuned_periods))} "
        + f"--links {' '.join(args.links)} "
        f"--lr {args.lr:g} --evals {args.evals} --seeds {args.seeds} --hours {args.hours} "
        "--cache DIR --publish` "
        f"(`recipes/mini/run.sh --stop-stage 3 --hours {args.hours}`). "
        f"{len(runner.pool.train)} training chunks of {runner.pool.chunk_len} frames, 100 "
        f"held-out utterances, a {STUDY_DEFAULTS.model.layers}x{STUDY_DEFAULTS.model.units} BLSTM "
        f"({small_bytes / 1e3:.0f} kB), {args.epochs:g} epoch(s) at global batch "
        f"{args.global_batch} chunks, seed 0"
        + (f" ({args.seeds} seeds in the last table)" if args.seeds > 1 else "")
        + f". lr {args.lr:g} at every step (no scaling, no "
        "decay), momentum 0.9, grad clip 5; diloco at its default outer optimizer; bmuf "
        "untuned (default filter eta = 1 - 1/N, zeta 1, Nesterov; at lr and at lr / N) and "
        "tuned (the grid's best point below, per learner count"
        + "".join(f"; {n} learners: eta {point.eta}, inner lr {point.lr(args.lr, n):.3g}, zeta "
                  f"{point.zeta(n):.3g}" for n, point in tuned.items())
        + "); "
        "hadpsgd super-learners of 4, random ring. Clock: a chunk costs the paper-size BLSTM's "
        f"V100 time ({FRAME_S * 1e6:.0f} us/frame), a message the time of {PAPER_BYTES / 1e6:.0f}"
        f" MB over the link plus {LATENCY_S * 1e3:g} ms (see the module's docstring). Plot: "
        f"`bench/results/outer_methods.png` (CE axis cut at {PLOT_CE_TOP:g}). Host time "
        f"{sum(done.values()):.0f} s summed over the {len(done)} runs (each on one thread; "
        "this pass computed "
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
    lines += grid_table(args, grid, tuned)
    lines += ["", "![outer methods study](outer_methods.png)"]
    return lines


def grid_table(args: argparse.Namespace, grid: dict[int, dict[BmufPoint, dict[str, Any]]],
               tuned: dict[int, BmufPoint]) -> list[str]:
    """The bmuf grid's rows: each point's inner lr, zeta, settled gain and CE (the tuned in
    bold)."""
    if not tuned:
        return []
    lines = ["", f"bmuf grid ({args.links[-1]}, H = {args.bmuf_grid_period}; bmuf's weights do "
             "not depend on the link). Gain: how many times the block's averaged update the "
             "filter steps once settled, zeta N (1 + eta) in the Nesterov form, zeta N in the "
             "classic one (`steady_gain`); step: inner lr x gain, the settled block step's "
             f"rate, which ssgd takes at lr {args.lr:g}. The first rows set it by the inner lr "
             "(zeta 1), the next by zeta (inner lr "
             f"{args.lr:g}); the classic row is at the best Nesterov point. Lowest CE: of the "
             f"run's {args.evals + 1} evaluations.", "",
             "| learners | eta | form | inner lr | zeta | gain | step | final CE | lowest CE |",
             "|---|---|---|---|---|---|---|---|---|"]
    for n, results in grid.items():
        for point, res in results.items():
            eta = eta_value(point.eta, n)
            gain = point.zeta(n) * point.gain(n)
            ces = [r["heldout_ce"] for r in res["records"]]
            mark = "**" if point == tuned[n] else ""
            lines.append(
                f"| {n} | {point.eta if point.eta != DEFAULT_ETA else f'1-1/N = {eta:g}'} | "
                f"{'Nesterov' if point.nesterov else 'classic'} | {point.lr(args.lr, n):.3g} | "
                f"{point.zeta(n):.3g} | {gain:.3g} | {point.lr(args.lr, n) * gain:.3g} | "
                f"{mark}{ces[-1]:.4f}{mark} | {min(ces):.4f} |")
    return lines


if __name__ == "__main__":
    main()
