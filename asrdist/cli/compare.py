"""asrdist-compare: strategies x scenarios x seeds in the simulator, over one corpus load, as a
table and curves.

Each --algo is a strategy (``NAME`` or ``NAME:OPTION=VALUE,...``), each --scenario a set of
stragglers (``none``, ``straggler:1x3``: learner 1 three times slower; ``straggler:1x3,5x2``)
and lost learners (``lost:5@0.5``: learner 5 lost for good halfway through its steps;
``straggler:0x4+lost:5@0.5``: both; an elastic strategy goes on without it, a fail-stop one's
run ends there, marked failed in the table: :mod:`asrdist.simulate.grid`), and --seeds the seeds
0..N-1 (a seed fixes the initial weights, the batches and the jitter, so the strategies' runs of
one seed are paired). The training, model and speed-model flags are asrdist-simulate's, shared
by every run. OUT gets each run's report in ``runs/`` (asrdist-plot reads them; a rerun keeps
the runs made with the same values), ``runs.csv`` (a row per run), ``table.csv`` and
``table.md`` (a row per strategy and scenario, against --baseline), ``compare.json`` (both, with
the target and budgets) and ``curves.png`` (held-out CE against steps and simulated time), each
written whole or not at all.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from pathlib import Path
from typing import Any

import click
import torch

from asrdist.cli import command
from asrdist.cli.options import click_option, derived_command, given_or_default
from asrdist.cli.simulate import corpus_options
from asrdist.cli.simulate import option_fields as simulate_fields
from asrdist.errors import AsrdistError
from asrdist.fsutil import atomic_write
from asrdist.options import check_value, make
from asrdist.parallel import registry
from asrdist.simulate import guards, table
from asrdist.simulate.corpus import ChunkPool
from asrdist.simulate.experiment import RunSpec, run_steps
from asrdist.simulate.figures import plot_curves
from asrdist.simulate.grid import Scenario, check_learners, parse_arm, parse_scenario
from asrdist.simulate.report import model_size
from asrdist.simulate.speed import SpeedModel
from asrdist.simulate.sweep import Sweep, cells
from asrdist.train.config import strategy_fields

log = logging.getLogger(__name__)

# asrdist-simulate's flags that a comparison sets per run (the strategy and its options, the
# seed, the stragglers) or does not offer
_PER_RUN = ("algo", "seed", "slow_learner", "noise_scale_every")
BUDGET_SHARES = (0.25, 0.5, 1.0)  # default budgets: of the baseline's time in the 1st scenario
TARGET_MARGIN = 1.02  # default target: within 2 % of the baseline's CE in the 1st scenario


def option_fields() -> dict[str, dataclasses.Field]:
    """asrdist-simulate's options that every run of a comparison shares."""
    return {n: f for n, f in simulate_fields().items()
            if n not in _PER_RUN and n not in strategy_fields()}


def _flags() -> list[click.Option]:
    return [click_option(name, f) for name, f in option_fields().items()]


@command(cls=derived_command(_flags), show_default=False, max_content_width=100)
@corpus_options
@click.option("--out", "-o", required=True, type=click.Path(file_okay=False),
              help="directory for the runs, the table and the curves")
@click.option("--algo", "arms", multiple=True, required=True, metavar="NAME[:OPT=VALUE,...]",
              help="a strategy with its own options (repeat: one per strategy)")
@click.option("--scenario", "scenarios", multiple=True, default=("none",), show_default=True,
              metavar="none|straggler:RANKxFACTOR[,...][+lost:RANK@FRACTION[,...]]",
              help="which learners straggle (RANK's compute FACTOR times slower) and which are "
                   "lost (RANK gone for good after FRACTION of its steps: elastic strategies "
                   "drop it, fail-stop ones fail there), parts joined by '+' (repeat: one per "
                   "scenario)")
@click.option("--seeds", default=3, show_default=True, type=click.IntRange(min=1),
              help="seeds 0..SEEDS-1 per strategy and scenario")
@click.option("--baseline", default=None,
              help="the --algo the others are paired against [default: the first]")
@click.option("--target-ce", type=float, default=None,
              help="the CE whose time to reach is tabled [default: the baseline's final CE "
                   "in the first scenario, +2 %]")
@click.option("--budget", "budgets", multiple=True, type=float,
              help="simulated seconds at which the CE is tabled (repeat) [default: 1/4, 1/2 "
                   "and all of the baseline's time in the first scenario]")
@click.option("--tensorboard", default="", metavar="DIR|none",
              help="each run's held-out records as TensorBoard event files, a directory per "
                   "run (the tensorboard extra) [default: OUT/tensorboard]")
def main(data: str, targets: str, out: str, arms: tuple[str, ...], scenarios: tuple[str, ...],
         seeds: int, baseline: str | None, target_ce: float | None, budgets: tuple[float, ...],
         tensorboard: str, **flags: Any) -> None:
    """Simulate every --algo in every --scenario with --seeds seeds on DATA, one corpus load
    for all, and write the runs, a table against --baseline and the curves to OUT."""
    values = given_or_default(option_fields(), flags)
    for name, f in option_fields().items():
        check_value(name, f, values[name])
    try:
        arm_list = [parse_arm(a) for a in dict.fromkeys(arms)]
        scenario_list = [parse_scenario(s) for s in dict.fromkeys(scenarios)]
        check_learners(scenario_list, values["learners"])
    except AsrdistError as e:
        raise click.BadParameter(str(e)) from None
    baseline = baseline or arm_list[0].label
    if baseline not in {a.label for a in arm_list}:
        raise click.BadParameter(f"{baseline!r} is none of the --algo given",
                                 param_hint="--baseline")
    base_arm = next(a for a in arm_list if a.label == baseline)
    if scenario_list[0].lost and not registry.spec(base_arm.algo).elastic \
            and (target_ce is None or not budgets):
        raise click.BadParameter(f"{baseline} is fail-stop, so every run of it in scenario "
                                 f"{scenario_list[0].label} fails: give --target-ce and "
                                 "--budget (or put a scenario without a lost learner first)",
                                 param_hint="--baseline")
    torch.set_num_threads(values["threads"])
    base = _base_spec(values)
    speed = make(SpeedModel, values)
    pool = ChunkPool.load(data, targets, values["chunk_len"], values["heldout_utts"],
                          cmvn=values["cmvn"], seed=0, max_utts=values["max_utts"])
    _start_up_lines(pool, base, speed, scenario_list)
    source = {"data": str(Path(data).resolve()), "targets": str(Path(targets).resolve()),
              "max_utts": values["max_utts"]}  # absolute: a rerun from elsewhere keeps the runs
    out_dir = Path(out)
    events = None if tensorboard == "none" else Path(tensorboard or out_dir / "tensorboard")
    sweep = Sweep(pool, base, speed, out_dir / "runs", source, lambda line: log.info("%s", line),
                  events)
    sweep.check(arm_list)
    reports = sweep(cells(arm_list, scenario_list, list(range(seeds))))
    _write(out_dir, reports, baseline, scenario_list[0].label, target_ce, list(budgets))


def _base_spec(values: dict[str, Any]) -> RunSpec:
    """The spec every run shares (each sets its strategy, options and seed)."""
    return make(RunSpec, values, algo="", learners=values["learners"], evals=values["evals"],
                eval_start=True)


def _start_up_lines(pool: ChunkPool, base: RunSpec, speed: SpeedModel,
                    scenario_list: list[Scenario]) -> None:
    """What a step costs in each scenario, and a short epoch's warning, before any run; a run
    whose learners cannot fit in memory is refused."""
    size = model_size(pool, base)
    guards.check_memory(size["weights"], size["bytes"], base.learners, base.optim.momentum > 0)
    nbytes = size["bytes"]
    for scenario in scenario_list:
        slowed = dataclasses.replace(speed, slow=scenario.slow)
        lost = "".join(f"; learner {r} lost after {f:.0%} of its steps"
                       for r, f in sorted(scenario.lost.items()))
        log.log(logging.WARNING if guards.free_link(speed) else logging.INFO,
                "scenario %s: %s%s", scenario.label,
                guards.cost_line(slowed, base.learners, nbytes), lost)
    few = guards.few_steps(run_steps(pool, base)[0], base.learners, base.batch)
    if few is not None:
        log.warning("%s", few)


def _write(out_dir: Path, reports: list[dict[str, Any]], baseline: str, first: str,
           target: float | None, budgets: list[float]) -> None:
    """The tables, compare.json and the curves; the target and budgets from the baseline's
    runs in the first scenario unless given."""
    reference = [r for r in reports if (r["strategy"], r["scenario"]) == (baseline, first)
                 and table.final_ce(r) is not None]
    if not reference and (target is None or not budgets):  # a lost learner ended them all
        raise AsrdistError(f"--baseline {baseline} failed in every run of scenario {first}: "
                           "give --target-ce and --budget")
    if target is None:
        target = TARGET_MARGIN * sum(table.final_ce(r) for r in reference) / len(reference)
    if not budgets:
        end = sum(r["summary"]["time_s"] for r in reference) / len(reference)
        budgets = [float(f"{share * end:.3g}") for share in BUDGET_SHARES]
    runs = table.run_rows(reports, baseline, target, budgets)
    rows = table.summary_rows(runs, budgets)
    markdown = table.to_markdown(rows, baseline, target, budgets)
    for name, text in (("runs.csv", table.to_csv(runs)), ("table.csv", table.to_csv(rows)),
                       ("table.md", markdown)):
        with atomic_write(out_dir / name) as f:
            f.write(text)
    with atomic_write(out_dir / "compare.json") as f:
        json.dump({"baseline": baseline, "target_ce": target, "budgets_s": budgets,
                   "rows": rows, "runs": runs}, f, indent=1)
    plot_curves(reports, out_dir / "curves.png")
    click.echo(markdown)
    click.echo(f"{out_dir}: table.md, table.csv, runs.csv, compare.json, curves.png, runs/",
               err=True)


if __name__ == "__main__":
    main()
