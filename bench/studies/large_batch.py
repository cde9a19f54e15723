"""Study 1 at convergence: the largest global batch each strategy takes before its held-out CE
falls more than 2 % behind the single-learner baseline, on the many-learner simulator.

Why this shape: at equal (few) epochs a large batch is judged on fewer updates, not on the
strategy, so every run here trains to the baseline's convergence with the papers' schedule
(``--lr-schedule ibm``: the rate scaled linearly with the global batch B from ``lr_ref`` at 256
chunks, a linear warm-up to it over the first epoch, then divided by ``--anneal-factor`` (sqrt
2) every epoch from ``--anneal-start`` on). The number of epochs comes from the baseline: a
probe run at its grid's middle rate without annealing, evaluated every epoch, stops improving
by more than 0.5 % an epoch at epoch E (``--epochs`` may cap it, and says so).

Every (strategy, batch) point of the sweep tries the same three ``lr_ref`` values and keeps its
best; the points that decide a strategy's verdict (its largest batch within 2 % and the next
larger one) get ``--seeds`` seeds at that rate, and the rule is applied to the seeds' means.
More learners (``--learners`` after the first) and the strategies in ``--few-strategies`` run
at fewer points (``--wide-multiples``, ``--few-multiples``) at the best rate of the first
learner count (of ``--lr-from`` for the few), one seed; each of the few from its smallest
batch up, stopping at the first beyond 2 % (a larger one could not raise its limit). Runs
go ``--jobs`` at a time, each in its own process, and are cached by spec (``--cache``), so
an interrupted study resumes.

With ``--wer GRAPH TEST_DATA TEST_TEXT``, the baseline and each swept strategy's deciding
points (seed 0, best rate) are run again with their exported average written as a final.pt,
decoded over the graph with the mini recipe's LM-weight sweep and scored against the text
(the word error rates, in ``--cache``/wer, are cached too).

    .venv/bin/python -m bench.studies.large_batch --data DIR --targets DIR
        [--cache DIR] [--epochs E] [--jobs 2] [--wer GRAPH TEST_DATA TEST_TEXT]
        [--publish]
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from asrdist.decode.decode_dir import decode_data_dir
from asrdist.fsutil import atomic_write
from asrdist.score.score import score_hypotheses
from asrdist.simulate.cache import RunCache
from asrdist.simulate.experiment import RunSpec
from asrdist.simulate.speed import SpeedModel
from asrdist.train.schedule import ScheduleOptions
from bench.results import generated, publish, publish_option
from bench.studies.common import (
    HADPSGD_NODES_OF_4,
    STUDY_DEFAULTS,
    corpus_options,
    study_runs,
    study_spec,
)
from bench.studies.figure import write_png
from bench.studies.outer_methods import BmufPoint

PERIOD = 8  # local steps between the averages of ma, bmuf and diloco
STRATEGIES = {
    "ssgd": {}, "ma": {"avg_period": PERIOD}, "adpsgd-fixed": {}, "adpsgd-random": {},
    "adpsgd-delay1": {}, "adpsgd-delayavg": {},
    "hadpsgd": HADPSGD_NODES_OF_4,
    "bmuf": {"avg_period": PERIOD},  # and BMUF's filter: strategy_options
    "diloco": {"avg_period": PERIOD},
}
# bmuf's filter as Study 4 tuned it: block momentum 0.5 and a settled block step of twice the
# averaged update, set by zeta (its default filter, eta = 1 - 1/N at zeta 1, diverged there);
# diloco at its default outer optimizer
BMUF = BmufPoint(PERIOD, "0.5", 2.0, by_zeta=True)
SPEED = SpeedModel(compute_s=1.0, update_s=0.25, latency_s=0.6)
TOLERANCE = 0.02  # the criterion: within 2 % of the baseline's held-out CE
PLATEAU = 0.005  # the baseline has converged when an epoch gains no more than 0.5 %
REF_BATCH = 256
# the mini recipe's decoding sweep (recipes/mini/run.sh, stage 6)
LMWTS = (6.0, 8.0, 10.0, 13.0)
WIPS = (0.0, 0.5)


@dataclass(frozen=True)
class Point:
    algo: str
    learners: int
    batch: int  # global batch, chunks


def schedule(args: argparse.Namespace, lr_ref: float, anneal: bool = True) -> ScheduleOptions:
    """The papers' rule; without ``anneal``, a constant rate after the warm-up."""
    return ScheduleOptions(lr=lr_ref, lr_schedule="ibm", lr_ref_batch=REF_BATCH,
                           lr_scaling="linear", warmup_epochs=args.warmup_epochs,
                           anneal_start=args.anneal_start if anneal else 1,
                           anneal_factor=args.anneal_factor if anneal else 1.0)


def make_spec(args: argparse.Namespace, p: Point, lr_ref: float, seed: int = 0,
              epochs: int | None = None, anneal: bool = True) -> RunSpec:
    """The run of point ``p`` at ``lr_ref``: evaluated after every epoch."""
    e = args.epochs if epochs is None else epochs
    return study_spec(algo=p.algo, learners=p.learners, batch_size=p.batch // p.learners,
                      epochs=float(e), options=strategy_options(p.algo, p.learners),
                      seed=seed, evals=e, schedule=schedule(args, lr_ref, anneal))


def strategy_options(algo: str, learners: int) -> dict[str, Any]:
    """The simulator's options of ``algo`` at ``learners`` (bmuf's block lr depends on it)."""
    return BMUF.options(learners) if algo == "bmuf" else STRATEGIES.get(algo, {})


def probe_point(args: argparse.Namespace) -> tuple[Point, float]:
    return Point("single", 1, args.baseline_batch), args.lr_refs[len(args.lr_refs) // 2]


def converged_epoch(ces: list[float], plateau: float = PLATEAU) -> int:
    """The epoch (from 1) after which the next one gains no more than ``plateau`` of the CE;
    all of them when every epoch gains more. ``ces``: held-out CE after each epoch."""
    for e in range(1, len(ces)):
        if ces[e] > ces[e - 1] * (1 - plateau):
            return e
    return len(ces)


def fits(p: Point, min_batch: int) -> bool:
    return p.batch % p.learners == 0 and p.batch // p.learners >= min_batch


def sweep_points(args: argparse.Namespace) -> list[Point]:
    """The baseline and every swept strategy at every multiple, first learner count."""
    b0, n0 = args.baseline_batch, args.learners[0]
    points = [Point("single", 1, b0)]
    points += [Point(a, n0, b0 * m) for a in args.strategies for m in args.multiples]
    return [p for p in points if fits(p, 1 if p.algo == "single" else args.min_batch)]


def wide_points(args: argparse.Namespace) -> list[Point]:
    """Points at one rate and one seed: the swept strategies with more learners."""
    b0 = args.baseline_batch
    points = [Point(a, n, b0 * m) for n in args.learners[1:] for a in args.strategies
              for m in args.wide_multiples]
    return [p for p in points if fits(p, args.min_batch)]


def few_points(args: argparse.Namespace) -> list[Point]:
    """Points at one rate and one seed: the strategies swept less (run upwards, see
    :meth:`Study.run_upwards`)."""
    b0 = args.baseline_batch
    points = [Point(a, args.learners[0], b0 * m) for a in args.few_strategies
              for m in sorted(args.few_multiples)]
    return [p for p in points if fits(p, args.min_batch)]


def within(ces: list[float], base: list[float], tolerance: float = TOLERANCE) -> bool:
    """The rule: the seeds' mean CE at most ``1 + tolerance`` times the baseline seeds' mean."""
    return statistics.mean(ces) <= (1 + tolerance) * statistics.mean(base)


def clear_of_spread(ces: list[float], base: list[float], tolerance: float = TOLERANCE) -> bool:
    """Whether the rule's answer holds beyond the seeds' spread: the mean is further from the
    threshold than the point's and the (scaled) baseline's standard deviations together."""
    threshold = (1 + tolerance) * statistics.mean(base)
    spread = sd(ces) + (1 + tolerance) * sd(base)
    return abs(statistics.mean(ces) - threshold) > spread


def sd(values: list[float]) -> float:
    return statistics.stdev(values) if len(values) > 1 else 0.0


def largest_within(by_batch: dict[int, list[float]], base: list[float],
                   tolerance: float = TOLERANCE) -> int | None:
    """The largest batch whose seeds' mean is within the tolerance of the baseline's."""
    good = [b for b, ces in by_batch.items() if ces and within(ces, base, tolerance)]
    return max(good) if good else None


def deciding_batches(by_batch: dict[int, list[float]], base: list[float],
                     tolerance: float = TOLERANCE) -> list[int]:
    """The batches a strategy's verdict rests on: its largest batch within the tolerance and
    the next larger one tried (the smallest tried when none is within)."""
    batches = sorted(by_batch)
    if not batches:
        return []
    limit = largest_within(by_batch, base, tolerance)
    if limit is None:
        return [batches[0]]
    larger = [b for b in batches if b > limit]
    return [limit] + larger[:1]


def verdict(ssgd: int | None, adpsgd: int | None, batches: list[int],
            factor: float = 3.0) -> tuple[str, str]:
    """("confirmed" | "refuted" | "partly" | "undecided", why) for the claim that ADPSGD takes
    a ``factor`` times larger global batch than SSGD, from each one's largest batch within 2 %
    on the grid ``batches``: the true limits lie between a grid point and the next, so the
    ratio is bracketed, and a limit at the grid's top is only a lower bound."""
    grid = sorted(batches)
    top = grid[-1]

    def above(b: int) -> float:
        larger = [g for g in grid if g > b]
        return larger[0] if larger else math.inf

    if ssgd is None and adpsgd is None:
        return "undecided", "neither is within 2 % at any batch tried (the grid starts too high)"
    if ssgd == top:
        return "undecided", (f"ssgd is within 2 % at the largest batch tried ({top}): the grid "
                             "does not reach its limit")
    if adpsgd is None:
        return "refuted", (f"ADPSGD is within 2 % at no batch tried, SSGD up to {ssgd} at least")
    low = adpsgd / (above(ssgd) if ssgd is not None else grid[0])
    high = above(adpsgd) / ssgd if ssgd is not None else math.inf
    bracket = f"the ratio of their limits lies between {low:g} and {high:g}"
    if ssgd is None:
        if low >= factor:
            return "confirmed", (f"ADPSGD is within 2 % up to {adpsgd}, SSGD at no batch tried "
                                 f"({grid[0]} and up): {bracket}")
        return "undecided", (f"ADPSGD is within 2 % up to {adpsgd}, SSGD at no batch tried: "
                             f"{bracket}")
    ratio = adpsgd / ssgd
    said = f"largest batch within 2 %: ADPSGD {adpsgd}, SSGD {ssgd} ({ratio:g}x; {bracket})"
    if ratio >= factor:
        return "confirmed", said
    if ratio <= 1:
        return "refuted", said
    return "partly", said


# ---- running


_RUNNER: RunCache | None = None


def _start(data: str, targets: str, cache: str, max_utts: int) -> None:
    global _RUNNER
    _RUNNER = study_runs(data, targets, cache, max_utts)


def _one(job: tuple[RunSpec, int]) -> None:
    assert _RUNNER is not None
    s, noise_every = job
    res = _RUNNER(s, SPEED, noise_every)
    print(f"{s.algo} n={s.learners} b={s.batch} lr_ref={s.schedule.lr} "
          f"seed={s.seed} ce={res['records'][-1]['heldout_ce']:.4f} "
          f"host={res['host_s']:.0f}s", flush=True)


def run_all(runner: RunCache, args: argparse.Namespace, specs: list[RunSpec],
            noise_every: int = 0) -> list[dict[str, Any]]:
    """Every spec's result, in order: those not in the cache computed ``--jobs`` at a time
    (the longest first, so the last to finish is a short one: a run costs about its epochs,
    more at small per-learner batches); with ``noise_every``, B_simple measured too."""
    todo: list[RunSpec] = []
    for s in specs:
        if s not in todo and not runner.cached(s, SPEED, noise_every):
            todo.append(s)
    todo.sort(key=lambda s: -s.epochs * (1 + 8 / s.batch))
    if todo:
        with ProcessPoolExecutor(args.jobs, initializer=_start,
                                 initargs=(args.data, args.targets, args.cache,
                                           args.max_utts)) as ex:
            list(ex.map(_one, [(s, noise_every) for s in todo]))
    return [runner(s, SPEED, noise_every) for s in specs]


@dataclass(frozen=True)
class WerJob:
    spec: RunSpec
    out: str  # the run's final.pt, decode dir and wer.json
    graph: str
    test_data: str
    test_text: str


def _wer_one(job: WerJob) -> None:
    """Run ``job.spec`` again with its export, decode the test data with it and score it;
    wer.json: the rerun's held-out CE, the best variant of the sweep and its counts."""
    assert _RUNNER is not None
    out = Path(job.out)
    out.mkdir(parents=True, exist_ok=True)
    last = _RUNNER.export(job.spec, SPEED, out / "final.pt")
    decode_data_dir(job.graph, job.test_data, out / "decode", nnet=str(out / "final.pt"),
                    lmwts=LMWTS, wips=WIPS)
    best = score_hypotheses(job.test_text, out / "decode").best
    assert best is not None  # a sweep gives variants
    total = best.result.total
    with atomic_write(out / "wer.json") as f:
        json.dump({"heldout_ce": last["heldout_ce"], "best": best.name, "wer": total.wer,
                   "errors": total.errors, "ref_words": total.ref_words}, f)
    print(f"{job.spec.algo} b={job.spec.batch} WER {total.wer:.2f} % ({best.name})", flush=True)


def missing_wer_input(graph: str, test_data: str, test_text: str) -> str | None:
    """What of ``--wer``'s inputs is not there (one line), or None."""
    needed = [(Path(graph) / "HCLG.fst", "GRAPH"), (Path(graph) / "words.txt", "GRAPH"),
              (Path(test_data) / "feats.scp", "TEST_DATA"), (Path(test_text), "TEST_TEXT")]
    for path, what in needed:
        if not path.is_file():
            return f"--wer {what}: no file {path}"
    return None


def run_wers(runner: RunCache, args: argparse.Namespace,
             jobs: list[WerJob]) -> list[dict[str, Any]]:
    """Every job's wer.json, those not done yet computed ``--jobs`` at a time."""
    todo = [j for j in jobs if not (Path(j.out) / "wer.json").exists()]
    if todo:
        with ProcessPoolExecutor(args.jobs, initializer=_start,
                                 initargs=(args.data, args.targets, args.cache,
                                           args.max_utts)) as ex:
            list(ex.map(_wer_one, todo))
    return [json.loads((Path(j.out) / "wer.json").read_text()) for j in jobs]


class Study:
    """The study's runs and what they give: per (point, lr_ref, seed) the held-out CE."""

    def __init__(self, runner: RunCache, args: argparse.Namespace) -> None:
        self.runner, self.args = runner, args
        self.results: dict[tuple[Point, float, int], dict[str, Any]] = {}
        self.noise_host_s = self.check_host_s = 0.0

    def run(self, jobs: list[tuple[Point, float, int]]) -> None:
        jobs = [job for job in dict.fromkeys(jobs) if job not in self.results]
        got = run_all(self.runner, self.args, [make_spec(self.args, *job) for job in jobs])
        self.results.update(zip(jobs, got, strict=True))

    def ce(self, p: Point, lr: float, seed: int = 0) -> float | None:
        res = self.results.get((p, lr, seed))
        return None if res is None else res["records"][-1]["heldout_ce"]

    def best_lr(self, p: Point) -> float | None:
        tried = [(ce, lr) for lr in self.args.lr_refs if (ce := self.ce(p, lr)) is not None]
        return min(tried)[1] if tried else None

    def seeds(self, p: Point) -> list[float]:
        """The CEs of the point's seeds at its best rate."""
        lr = self.best_lr(p)
        if lr is None:
            return []
        return [ce for s in range(self.args.seeds) if (ce := self.ce(p, lr, s)) is not None]

    def by_batch(self, algo: str, n: int) -> dict[int, list[float]]:
        return {p.batch: self.seeds(p) for (p, _, _) in self.results
                if p.algo == algo and p.learners == n and self.seeds(p)}

    def base(self) -> list[float]:
        return self.seeds(Point("single", 1, self.args.baseline_batch))

    def missing_seeds(self) -> list[tuple[Point, float, int]]:
        """Seeds still to run at the baseline and at every swept strategy's deciding
        batches."""
        n0, out = self.args.learners[0], []
        points = [Point("single", 1, self.args.baseline_batch)]
        for algo in self.args.strategies:
            points += [Point(algo, n0, b)
                       for b in deciding_batches(self.by_batch(algo, n0), self.base())]
        for p in points:
            lr = self.best_lr(p)
            out += [(p, lr, s) for s in range(1, self.args.seeds)
                    if lr is not None and (p, lr, s) not in self.results]
        return out

    def noise(self) -> tuple[Point, list[dict[str, Any]]] | None:
        """ssgd's B_simple along training at ``--noise-multiple``, best rate, seed 0."""
        a = self.args
        p = Point("ssgd", a.learners[0], a.baseline_batch * a.noise_multiple)
        lr = self.best_lr(p)
        if not a.noise_every or lr is None:
            return None
        res = run_all(self.runner, a, [make_spec(a, p, lr)], a.noise_every)[0]
        self.noise_host_s = res["host_s"]
        return p, res["noise_scale"]

    def longer(self) -> list[tuple[Point, float, float]]:
        """(point, CE at --epochs, CE at --check-epochs) of the baseline and each swept
        strategy at --check-multiple, seed 0, best rate: does the verdict hold with more
        epochs (annealed from the second half of them, as the runs are)?"""
        a = self.args
        if not a.check_epochs:
            return []
        n0, b0 = a.learners[0], a.baseline_batch
        points = [Point("single", 1, b0)] + [Point(x, n0, b0 * a.check_multiple)
                                             for x in a.strategies]
        jobs = [(p, lr) for p in points if (lr := self.best_lr(p)) is not None]
        more = argparse.Namespace(**{**vars(a), "epochs": a.check_epochs,
                                     "anneal_start": a.check_epochs // 2 + 1})
        got = run_all(self.runner, a, [make_spec(more, p, lr) for p, lr in jobs])
        self.check_host_s = sum(r["host_s"] for r in got)
        return [(p, self.ce(p, lr) or math.nan, r["records"][-1]["heldout_ce"])
                for (p, lr), r in zip(jobs, got, strict=True)]

    def wers(self) -> list[tuple[Point, float, dict[str, Any]]]:
        """(point, rate, wer.json) of the baseline and each swept strategy's deciding
        points, seed 0, best rate, with --wer."""
        a = self.args
        if not a.wer:
            return []
        points = [Point("single", 1, a.baseline_batch)]
        for algo in a.strategies:
            points += [Point(algo, a.learners[0], b)
                       for b in deciding_batches(self.by_batch(algo, a.learners[0]),
                                                 self.base())]
        chosen = [(p, lr) for p in points if (lr := self.best_lr(p)) is not None]
        jobs = []
        for p, lr in chosen:
            spec = make_spec(a, p, lr)
            out = Path(a.cache) / "wer" / self.runner.key(spec, SPEED)
            jobs.append(WerJob(spec, str(out), *a.wer))
        got = run_wers(self.runner, a, jobs)
        return [(p, lr, w) for (p, lr), w in zip(chosen, got, strict=True)]

    def run_upwards(self, points: list[Point]) -> None:
        """Run each strategy's ``points`` from its smallest batch up, at :meth:`lr_for`'s
        rate, one seed, until one is beyond the tolerance. A larger batch is then not run:
        it could raise the strategy's limit only if its CE fell as the batch grew, which no
        swept row shows; such points already in the cache are still shown."""
        queues: dict[str, list[Point]] = {}
        for p in sorted(points, key=lambda p: p.batch):
            queues.setdefault(p.algo, []).append(p)
        while queues:
            heads = {algo: queue.pop(0) for algo, queue in queues.items()}
            rates = {algo: self.lr_for(p) for algo, p in heads.items()}
            self.run([(p, rates[a], 0) for a, p in heads.items() if rates[a] is not None])
            for algo, p in heads.items():
                ce = self.ce(p, rates[algo]) if rates[algo] is not None else None
                if ce is None or not within([ce], self.base()):
                    rest = [(q, lr, 0) for q in queues.pop(algo)
                            if (lr := self.lr_for(q)) is not None
                            and self.runner.cached(make_spec(self.args, q, lr), SPEED)]
                    self.run(rest)
            queues = {algo: queue for algo, queue in queues.items() if queue}

    def lr_for(self, p: Point) -> float | None:
        """An extra point's rate: the first learner count's best at the same batch, of the
        same strategy, else of ``--lr-from``."""
        for algo in (p.algo, self.args.lr_from):
            lr = self.best_lr(Point(algo, self.args.learners[0], p.batch))
            if lr is not None:
                return lr
        return None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    corpus_options(ap)
    ap.add_argument("--probe-epochs", type=int, default=12,
                    help="the baseline's probe run without annealing, evaluated every epoch")
    ap.add_argument("--epochs", type=int, default=0,
                    help="epochs of every run (0: where the probe stops improving by 0.5 %%)")
    ap.add_argument("--warmup-epochs", type=float, default=1.0)
    ap.add_argument("--anneal-start", type=int, default=0,
                    help="first annealed epoch (0: the second half of the epochs)")
    ap.add_argument("--anneal-factor", type=float, default=math.sqrt(2))
    ap.add_argument("--baseline-batch", type=int, default=16)
    ap.add_argument("--multiples", type=int, nargs="+", default=[4, 16, 64])
    ap.add_argument("--learners", type=int, nargs="+", default=[16, 64])
    ap.add_argument("--wide-multiples", type=int, nargs="*", default=[16, 64],
                    help="multiples at which the later learner counts run")
    ap.add_argument("--min-batch", type=int, default=4, help="least per-learner batch")
    ap.add_argument("--lr-refs", type=float, nargs="+", default=[0.1, 0.2, 0.4],
                    help="the rate grid, at a global batch of 256 chunks")
    ap.add_argument("--seeds", type=int, default=3, help="seeds at the deciding points")
    ap.add_argument("--strategies", nargs="+", default=["ssgd", "adpsgd-random"],
                    choices=STRATEGIES, help="swept at every multiple and rate")
    ap.add_argument("--few-strategies", nargs="*", default=[], choices=STRATEGIES,
                    help="run at --few-multiples only, at --lr-from's best rate, one seed")
    ap.add_argument("--few-multiples", type=int, nargs="*", default=[16])
    ap.add_argument("--lr-from", default="adpsgd-random", choices=STRATEGIES)
    ap.add_argument("--noise-every", type=int, default=0,
                    help="also run ssgd at --noise-multiple measuring B_simple every this "
                    "many steps (0: not)")
    ap.add_argument("--noise-multiple", type=int, default=16)
    ap.add_argument("--check-epochs", type=int, default=0,
                    help="also run the baseline and the swept strategies at --check-multiple "
                    "for this many epochs (0: not)")
    ap.add_argument("--check-multiple", type=int, default=16)
    ap.add_argument("--wer", nargs=3, metavar=("GRAPH", "TEST_DATA", "TEST_TEXT"),
                    default=None, help="also decode the baseline and the deciding points "
                    "(seed 0) over GRAPH on TEST_DATA (the features of --data's kind) and "
                    "score them against TEST_TEXT")
    ap.add_argument("--jobs", type=int, default=2, help="runs at once, a process each")
    publish_option(ap, __file__)
    args = ap.parse_args()
    if args.wer and (why := missing_wer_input(*args.wer)):
        ap.error(why)  # before the sweep's hours, not at the first decode
    runner = study_runs(args.data, args.targets, args.cache, args.max_utts)
    probe, probe_lr = probe_point(args)
    probe_spec = make_spec(args, probe, probe_lr, epochs=args.probe_epochs, anneal=False)
    study = Study(runner, args)
    sweep = [(p, lr, 0) for p in sweep_points(args) for lr in args.lr_refs]
    if args.epochs:  # known: the probe runs beside the sweep
        args.anneal_start = args.anneal_start or args.epochs // 2 + 1
        run_all(runner, args, [probe_spec, *[make_spec(args, *job) for job in sweep]])
    curve = [r["heldout_ce"] for r in run_all(runner, args, [probe_spec])[0]["records"]]
    args.converged = converged_epoch(curve)
    args.epochs = args.epochs or args.converged
    args.anneal_start = args.anneal_start or args.epochs // 2 + 1
    study.run(sweep)
    while missing := study.missing_seeds():  # the deciding points move as seeds come in
        study.run(missing)
    study.run([(p, lr, 0) for p in wide_points(args) if (lr := study.lr_for(p)) is not None])
    study.run_upwards(few_points(args))
    noise = study.noise()
    longer = study.longer()
    wers = study.wers()
    plot(study, curve, noise, generated(__file__, ".png"))
    publish(section(study, runner, curve, noise, longer, wers), args.publish)


# ---- the section


def plot(study: Study, curve: list[float],
         noise: tuple[Point, list[dict[str, Any]]] | None, path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    args = study.args
    base = study.base()
    fig, axes = plt.subplots(1, 3 if noise else 2, figsize=(16 if noise else 11, 4.2))
    left, right = axes[0], axes[1]
    for n, marker in zip(args.learners, "os^", strict=False):
        for algo in args.strategies + args.few_strategies:
            pts = sorted(study.by_batch(algo, n).items())
            if not pts:
                continue
            left.errorbar([b for b, _ in pts], [statistics.mean(c) for _, c in pts],
                          yerr=[sd(c) for _, c in pts], marker=marker, capsize=3,
                          ls="-" if n == args.learners[0] else ":", label=f"{algo}, {n}")
    left.axhline(statistics.mean(base), color="k", lw=0.8, label="single learner")
    left.axhline(statistics.mean(base) * (1 + TOLERANCE), color="k", lw=0.8, ls="--",
                 label="+2 %")
    left.set_xscale("log", base=2)
    left.set_xlabel("global batch (chunks)")
    left.set_ylabel(f"held-out CE after {args.epochs} epochs (mean of seeds)")
    # above the axes: with nine strategies inside, it hid a point
    left.legend(fontsize=6, loc="lower left", bbox_to_anchor=(0.0, 1.01), ncol=3)
    right.plot(range(1, len(curve) + 1), curve, "k:", label="baseline probe, no annealing")
    for algo in ["single"] + args.strategies:
        n = 1 if algo == "single" else args.learners[0]
        for b in sorted(study.by_batch(algo, n)):
            p = Point(algo, n, b)
            res = study.results[(p, study.best_lr(p), 0)]
            right.plot([r["epochs"] for r in res["records"]],
                       [r["heldout_ce"] for r in res["records"]], label=f"{algo} B={b}")
    right.set_xlabel("epochs")
    right.set_ylabel("held-out CE (seed 0, best rate)")
    right.legend(fontsize=6)
    if noise:
        p, rows = noise
        ax = axes[2]
        pts = [(r["epochs"], r["b_simple"]) for r in rows if r["b_simple"]]
        ax.semilogy([e for e, _ in pts], [b for _, b in pts], "k-",
                    label=f"B_simple, {p.algo} {p.learners} x {p.batch // p.learners}")
        for algo in args.strategies:
            limit = largest_within(study.by_batch(algo, args.learners[0]), base)
            if limit:
                ax.axhline(limit, lw=0.8, ls="--", label=f"{algo}: largest B within 2 %",
                           color=f"C{args.strategies.index(algo)}")
        ax.set_xlabel("epochs")
        ax.set_ylabel("chunks")
        ax.legend(fontsize=6)
    write_png(fig, path)


def cell(study: Study, p: Point) -> str:
    ces, lr = study.seeds(p), study.best_lr(p)
    if not ces or lr is None:
        return "-"
    edge = "" if len(study.args.lr_refs) < 2 or lr not in (
        min(study.args.lr_refs), max(study.args.lr_refs)) or p.learners != (
        1 if p.algo == "single" else study.args.learners[0]) else ", edge"
    if len(ces) == 1:
        return f"{ces[0]:.4f} (lr_ref {lr:g}{edge})"
    return f"{statistics.mean(ces):.4f} +- {sd(ces):.4f} ({len(ces)} seeds, lr_ref {lr:g}{edge})"


def section(study: Study, runner: RunCache, curve: list[float],
            noise: tuple[Point, list[dict[str, Any]]] | None,
            longer: list[tuple[Point, float, float]],
            wers: list[tuple[Point, float, dict[str, Any]]] = ()) -> list[str]:
    args, b0 = study.args, study.args.baseline_batch
    base = study.base()
    base_p = Point("single", 1, b0)
    host = (sum(r["host_s"] for r in study.results.values()) + study.noise_host_s
            + study.check_host_s)
    lines = [
        "## Study 1: large batch (simulator)",
        "",
        "Command: `.venv/bin/python -m bench.studies.large_batch --data DATA --targets TARGETS "
        f"--hours {args.hours} --probe-epochs {args.probe_epochs} --epochs {args.epochs} "
        f"--multiples {' '.join(map(str, args.multiples))} --learners "
        f"{' '.join(map(str, args.learners))} --wide-multiples "
        f"{' '.join(map(str, args.wide_multiples))} --lr-refs "
        f"{' '.join(f'{x:g}' for x in args.lr_refs)} --seeds {args.seeds} --strategies "
        f"{' '.join(args.strategies)}"
        + (f" --few-strategies {' '.join(args.few_strategies)} --few-multiples "
           f"{' '.join(map(str, args.few_multiples))}" if args.few_strategies else "")
        + (f" --noise-every {args.noise_every} --noise-multiple {args.noise_multiple}"
           if args.noise_every else "")
        + (f" --check-epochs {args.check_epochs} --check-multiple {args.check_multiple}"
           if args.check_epochs else "")
        + (" --wer GRAPH TEST_DATA TEST_TEXT" if wers else "")
        + f" --jobs {args.jobs} --cache DIR --publish` (`recipes/mini/run.sh "
        f"--stop-stage 3 --hours {args.hours}`: {args.hours} h of clean training speech, "
        "about four times that after augmentation). "
        f"{len(runner.pool.train)} training chunks of 21 frames, "
        f"{len(runner.pool.heldout)} held-out chunks (100 utterances), a "
        f"{STUDY_DEFAULTS.model.layers}x{STUDY_DEFAULTS.model.units} BLSTM, momentum 0.9, "
        "gradient clipping "
        f"5, equally fast learners; ma, bmuf and diloco average every {PERIOD} steps (bmuf: "
        f"block momentum {BMUF.eta}, block lr {BMUF.mult:g} / (N (1 + {BMUF.eta})), Nesterov, "
        "Study 4's tuned filter; diloco: outer Nesterov lr 0.7, momentum 0.9), hadpsgd has "
        "super-learners of 4 on a random ring.",
        "",
        f"Schedule (`--lr-schedule ibm`): peak rate lr_ref x B / {REF_BATCH} at global batch "
        f"B, linear warm-up from lr_ref over {args.warmup_epochs:g} epoch (no warm-up at B <= "
        f"{REF_BATCH}: it starts at the peak), divided by {args.anneal_factor:.3g} every epoch "
        f"from epoch {args.anneal_start} on; {args.epochs} epochs. The baseline's probe (one "
        f"learner, batch {b0}, lr_ref {probe_point(args)[1]:g}, no annealing) stopped "
        f"improving by more than {PLATEAU:.1%} an epoch after epoch {args.converged} of "
        f"{args.probe_epochs} (held-out CE per epoch: "
        + ", ".join(f"{c:.4f}" for c in curve) + ")"
        + ("" if args.epochs == args.converged else
           f"; the runs take {args.epochs} epochs, not {args.converged}, to fit the compute "
           "budget") + ". "
        f"Each (strategy, batch) point of the sweep tries lr_ref in "
        f"{{{', '.join(f'{x:g}' for x in args.lr_refs)}}} and keeps the best (', edge': the "
        "best is at the grid's edge); the baseline and each swept strategy's deciding points "
        f"(its largest batch within 2 % and the next one) get {args.seeds} seeds at that rate "
        "(mean +- standard deviation); other cells are one seed. "
        f"Single-learner baseline at batch {b0}: CE {cell(study, base_p)}. "
        f"Plot: `bench/results/large_batch.png`. Host time of the runs {host / 60:.0f} min "
        f"of one core, {args.jobs} runs at a time on the shared 2-core machine.",
        "",
        "| strategy | learners | " + " | ".join(f"B={b0 * m} ({m}x)" for m in args.multiples)
        + " | largest B within 2 % |",
        "|---|---|" + "---|" * (len(args.multiples) + 1),
    ]
    verdicts = {}
    for n in args.learners:
        for algo in args.strategies + args.few_strategies:
            by = study.by_batch(algo, n)
            if not by:
                continue
            cells = [cell(study, Point(algo, n, b0 * m)) for m in args.multiples]
            limit = largest_within(by, base)
            swept = n == args.learners[0] and algo in args.strategies
            if swept:
                verdicts[algo] = limit
                last = str(limit) if limit else "none"  # plain: bench.projection reads it
            else:  # a partial row gives a bound, not a limit
                last = (f"{limit} of {sorted(by)} tried" if limit else
                        f"none of {sorted(by)} tried")
            lines.append(f"| {algo} | {n} | " + " | ".join(cells) + f" | {last} |")
    lines += ["", "Deciding points against the threshold (baseline mean x 1.02 = "
              f"{statistics.mean(base) * (1 + TOLERANCE):.4f}; 'beyond the spread': the "
              "mean is further from it than the point's and the baseline's standard deviations "
              "together):", "",
              "| strategy | B | seeds | mean CE | vs baseline | within 2 % | beyond the spread |",
              "|---|---|---|---|---|---|---|"]
    n0 = args.learners[0]
    for algo in args.strategies:
        by = study.by_batch(algo, n0)
        for b in deciding_batches(by, base):
            ces = by[b]
            lines.append(
                f"| {algo} | {b} | {len(ces)} | {statistics.mean(ces):.4f} | "
                f"{statistics.mean(ces) / statistics.mean(base) - 1:+.1%} | "
                f"{'yes' if within(ces, base) else 'no'} | "
                f"{'yes' if clear_of_spread(ces, base) else 'no'} |")
    if "ssgd" in verdicts and "adpsgd-random" in verdicts:
        word, why = verdict(verdicts["ssgd"], verdicts["adpsgd-random"],
                            [b0 * m for m in args.multiples])
        lines += ["", f"Verdict on \"ADPSGD (random ring) takes a 3x larger global batch than "
                  f"SSGD\" at this scale, {n0} learners: **{word}**: {why}."]
    if longer:
        base_long = longer[0][2]
        lines += ["", f"Longer runs: {args.check_epochs} epochs (annealed from epoch "
                  f"{args.check_epochs // 2 + 1}), seed 0, each point's best rate, against "
                  f"the same runs at {args.epochs} epochs:", "",
                  f"| strategy | learners | B | CE, {args.epochs} epochs | CE, "
                  f"{args.check_epochs} epochs | vs baseline at {args.check_epochs} |",
                  "|---|---|---|---|---|---|"]
        lines += [f"| {p.algo} | {p.learners} | {p.batch} | {short:.4f} | {long:.4f} | "
                  f"{long / base_long - 1:+.1%} |" for p, short, long in longer]
    if wers:
        lines += wer_lines(study, wers)
    if noise:
        lines += noise_lines(study, *noise)
    return lines


def wer_lines(study: Study, wers: list[tuple[Point, float, dict[str, Any]]]) -> list[str]:
    """The word error rates of the deciding points' final models."""
    a = study.args
    base_wer = wers[0][2]["wer"]
    lines = ["", f"Word error rate of the final models (`--wer`): the baseline and each swept "
             "strategy's deciding points, seed 0, each point's best rate, run again with "
             "its exported average written as a final.pt (`asrdist.simulate.export`; the "
             "rerun's held-out CE is the cached run's, checked below), decoded with "
             "`asrdist-decode` over the mini recipe's graph (its trigram LM) on the recipe's "
             "test set (GRAPH, TEST_DATA: `recipes/mini/run.sh --hours "
             f"{a.hours}`'s exp/graph and data/{Path(a.wer[1]).name}), LM weight in "
             f"{{{', '.join(f'{x:g}' for x in LMWTS)}}} x word insertion penalty in "
             f"{{{', '.join(f'{x:g}' for x in WIPS)}}} as the recipe's stage 6, and scored "
             "with `asrdist-score` against data/test/text: the WER is the best of the sweep "
             "(as utils/best_wer.sh picks it, so tuned on the test set itself, for every "
             "model alike); one seed, so differences of a few tenths are within noise.", "",
             "| strategy | learners | B | lr_ref | CE (cached) | CE (rerun) | WER % | errors "
             "/ words | best LM weight_penalty | vs baseline |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for p, lr, w in wers:
        lines.append(f"| {p.algo} | {p.learners} | {p.batch} | {lr:g} | "
                     f"{study.ce(p, lr) or math.nan:.4f} | {w['heldout_ce']:.4f} | "
                     f"{w['wer']:.2f} | {w['errors']} / {w['ref_words']} | {w['best']} | "
                     f"{w['wer'] - base_wer:+.2f} |")
    return lines


def noise_lines(study: Study, p: Point, rows: list[dict[str, Any]]) -> list[str]:
    """B_simple of this study's model at each epoch's end, beside its largest good batches."""
    a = study.args
    limits = {algo: largest_within(study.by_batch(algo, a.learners[0]), study.base())
              for algo in a.strategies}
    lines = ["", f"Gradient noise scale of this study's model and corpus: {p.algo}, "
             f"{p.learners} learners x {p.batch // p.learners} chunks at lr_ref "
             f"{study.best_lr(p):g}, seed 0, B_simple = tr(Sigma) / |G|^2 measured every "
             f"{a.noise_every} steps (`asrdist.simulate.noise`: B_small "
             f"{p.batch // p.learners}, B_big {p.batch}, moving averages of decay 0.9), "
             "the last measurement of each epoch, beside the largest batches within 2 % ("
             + ", ".join(f"{k} {v or 'none'}" for k, v in limits.items()) + "):", "",
             "| epochs | B_simple (chunks) | \\|G\\|^2 (EMA) | tr(Sigma) (EMA) |",
             "|---|---|---|---|"]
    for e in range(a.epochs + 1):
        last = [r for r in rows if r["epochs"] <= e + 1e-9]
        if last and (e == 0 or last[-1]["epochs"] > e - 1):
            r = last[-1]
            b = f"{r['b_simple']:.0f}" if r["b_simple"] else "-"
            lines.append(f"| {r['epochs']:.2f} | {b} | {r['grad_sq']:.4g} | "
                         f"{r['trace_sigma']:.4g} |")
    return lines


if __name__ == "__main__":
    main()
