"""asrdist-simulate: N learners of one strategy in one process on a simulated clock.

Its flags come from the declarations (asrdist.options), as asrdist-train's do: those the two
commands have in common (the model's, the optimizer's, the learning-rate schedule's, the batch,
chunk, seed, clipping and held-out options, and the strategies' own) are asrdist-train's
fields, with their defaults and help; the speed model's come from
:class:`~asrdist.simulate.speed.SpeedModel`, the simulator's own from :class:`SimulateOptions`.
What the simulator does not model has no flag here: the DNN and the BLSTM's chunk context (the
chunk pool holds the labelled frames only), NG-SGD, SpecAugment, and the options of real
exchanges (timeouts, distance sampling).
"""

from __future__ import annotations

import dataclasses
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click
import torch

from asrdist.cli import command
from asrdist.cli.options import click_option, derived_command, given_or_default
from asrdist.errors import AsrdistError
from asrdist.options import (
    NON_NEGATIVE,
    POSITIVE,
    Options,
    check_value,
    declared,
    flag,
    make,
    option,
    paths,
)
from asrdist.parallel import registry
from asrdist.simulate import guards, report
from asrdist.simulate.corpus import ChunkPool
from asrdist.simulate.experiment import RunSpec, run
from asrdist.simulate.export import export_final
from asrdist.simulate.speed import SpeedModel
from asrdist.simulate.tensorboard import write_records
from asrdist.train.config import FIELDS, coerce_option, strategy_fields

log = logging.getLogger(__name__)

# the options of RunSpec's components that the simulator does not model: the DNN's and TDNN-F's
# (their context is part of the weights, and the chunk pool holds the labelled frames only),
# the BLSTM's and Conformer's chunk context (likewise), the optimizer's choice (it runs SGD),
# the shuffle buffer and variance normalisation (the pool is read whole, means normalised);
# every other option of RunSpec is a flag of both commands, so one declared on a component
# reaches asrdist-simulate with no edit here
NOT_SIMULATED = ("chunk_left_context", "chunk_right_context", "splice", "hidden_layers",
                 "hidden_units", "activation", "tdnnf_layers", "tdnnf_dim", "tdnnf_bottleneck",
                 "optimizer", "shuffle_buffer", "cmvn_norm_vars")
SIMULATED_MODELS = ("blstm", "conformer")
# asrdist-train's options that the simulator takes outside RunSpec: the chunk pool's and the
# noise probe's
OUTSIDE_SPEC = ("heldout_utts", "noise_scale_every")
# the options of real learner processes (asrdist.parallel.options.ProcessOptions) but the slow
# learner, which is the speed model's here
_EXCHANGE_ONLY = ("exchange_timeout", "distance_every", "elastic")


@dataclass(frozen=True)
class SimulateOptions(Options):
    """asrdist-simulate's own options (``--epochs`` is a float here: studies run parts of
    one; ``--algo`` defaults to a distributed strategy)."""

    algo: str = option("ssgd", "distributed strategy (asrdist.parallel.registry)")
    learners: int = option(16, "simulated learners", check=POSITIVE)
    epochs: float = option(float(FIELDS["epochs"].default),  # asrdist-train's, as a float
                           "passes over the training data (fractions too)", check=POSITIVE)
    max_utts: int = option(0, "training utterances to keep (0 = all)", check=NON_NEGATIVE)
    evals: int = option(4, "held-out evaluations over the run, the last of the exported "
                        "average (and one of the start)", check=POSITIVE)
    threads: int = option(1, "torch CPU threads (small models run fastest on one)",
                          check=POSITIVE)


def shared_fields() -> dict[str, dataclasses.Field]:
    """The options asrdist-simulate shares with asrdist-train, as asrdist-train declares them:
    RunSpec's (its components' but :data:`NOT_SIMULATED`; not ``--epochs``, a float here),
    :data:`OUTSIDE_SPEC` and the strategies' options."""
    spec = [n for n in paths(RunSpec) if n not in NOT_SIMULATED and n != "epochs"]
    strategy = {n: f for n, f in strategy_fields().items() if n not in _EXCHANGE_ONLY}
    return {**{n: FIELDS[n] for n in (*spec, *OUTSIDE_SPEC)}, **strategy}


def option_fields() -> dict[str, dataclasses.Field]:
    """Every derived option of asrdist-simulate, by name."""
    return {**declared(SimulateOptions), **shared_fields(), **declared(SpeedModel)}


def _flags() -> list[click.Option]:
    return [click_option(name, f) for name, f in option_fields().items()]


def _check_destination(path: str | None, flag_name: str) -> None:
    """Refuse an output the run could not write at its end before the run, not after it."""
    if path is None:
        return
    parent = Path(path).parent
    if not parent.is_dir():
        raise click.BadParameter(f"{path}: no directory {parent}", param_hint=flag_name)
    if not os.access(parent, os.W_OK):
        raise click.BadParameter(f"{path}: directory {parent} is not writable",
                                 param_hint=flag_name)


def corpus_options(f):
    """--data and --targets: the corpus a simulated run (or a comparison) trains on."""
    f = click.option("--targets", required=True, type=click.Path(exists=True),
                     help="ingested alignment dir (asrdist-ingest-ali)")(f)
    return click.option("--data", required=True, type=click.Path(exists=True),
                        help="Kaldi data dir")(f)


@command(cls=derived_command(_flags), show_default=False, max_content_width=100)
@corpus_options
@click.option("--out", "-o", required=True, type=click.Path(dir_okay=False),
              help="JSON file for the records and the summary")
@click.option("--export", "export", default=None, type=click.Path(dir_okay=False),
              help="also write the exported average as a final.pt (for asrdist-decode)")
@click.option("--option", "-O", "options", multiple=True, metavar="NAME=VALUE",
              help="a strategy option, as its flag: -O avg_period=8 is --avg-period 8")
@click.option("--tensorboard", "tensorboard", default=None, type=click.Path(file_okay=False),
              help="also write the held-out records as TensorBoard event files here "
                   "(heldout/*, the simulated clock as wall time; the tensorboard extra)")
def main(data: str, targets: str, out: str, export: str | None, options: tuple[str, ...],
         tensorboard: str | None, **flags: Any) -> None:
    """Train LEARNERS simulated learners of ALGO on DATA and write held-out CE/accuracy
    against simulated time, steps and epochs, staleness and waits to OUT, with what describes
    the run (speed model, resolved strategy options, data, model size, steps per epoch)."""
    for path, flag_name in ((out, "--out"), (export, "--export")):
        _check_destination(path, flag_name)
    values = given_or_default(option_fields(), flags)
    try:
        registry.spec(values["algo"])  # before the corpus loads, and before -O is read
    except ValueError as e:
        raise click.BadParameter(str(e), param_hint="--algo") from None
    for name, f in option_fields().items():
        check_value(name, f, values[name])
    if values["model"] not in SIMULATED_MODELS:
        raise click.BadParameter(
            f"{values['model']!r}: the simulator runs {' or '.join(SIMULATED_MODELS)} (its "
            "chunks carry no context frames, which a DNN's or TDNN-F's weights need)",
            param_hint="--model")
    own = make(SimulateOptions, values)
    chosen = _strategy_options(own.algo, flags, options)
    torch.set_num_threads(own.threads)
    speed = SpeedModel.with_slow(values["slow_learner"], seed=values["seed"],
                                 **{f.name: values[n] for n, f in declared(SpeedModel).items()})
    spec = make(RunSpec, values, algo=own.algo, learners=own.learners, evals=own.evals,
                options=chosen, eval_start=True)
    pool = ChunkPool.load(data, targets, spec.reading.chunk_len, values["heldout_utts"],
                          cmvn=spec.reading.cmvn, seed=spec.seed, max_utts=own.max_utts)
    size = report.model_size(pool, spec)
    guards.check_memory(size["weights"], size["bytes"], spec.learners, spec.optim.momentum > 0)
    about = report.describe(spec, speed, pool, {"data": data, "targets": targets,
                                                "max_utts": own.max_utts}, size)
    log.info("%s", guards.cost_line(speed, spec.learners, about["model"]["bytes"]))
    few = guards.few_steps(about["steps"]["per_epoch"], spec.learners, spec.batch)
    if few is not None:
        log.warning("%s", few)
    warnings = [few] if few is not None else []
    noise_every = values["noise_scale_every"]
    result = run(pool, spec, speed, noise_every)
    divergence = guards.diverged(result.records)
    if divergence is not None:
        warnings.append(divergence)
    report.write(out, report.build(about, result, warnings, noise_every))
    if export is not None:
        export_final(export, pool, spec, result)
    if tensorboard is not None:
        write_records(Path(tensorboard), result.records)
    for r in result.records:
        click.echo(f"t={r['time_s']:.1f}s steps={r['steps']:.0f} epochs={r['epochs']:.2f} "
                   f"ce={r['heldout_ce']:.4f} acc={r['heldout_acc']:.4f} "
                   f"dist={r['dist_to_mean']:.4g}" + (" final" if r.get("final") else ""))
    if divergence is not None:  # after the records it is about
        log.warning("%s", divergence)
    click.echo(f"host {result.summary['host_s']:.1f} s; {out}", err=True)


def _strategy_options(algo: str, flags: dict[str, Any],
                      items: tuple[str, ...]) -> dict[str, Any]:
    """The options of strategy ``algo`` given as flags or ``-O NAME=VALUE`` (the others take
    their defaults); a flag of another strategy's option is ignored with a warning, as
    asrdist-train ignores it."""
    taken = [n for n in registry.algorithm_options(algo) if n in strategy_fields()]
    ignored = [flag(n) for n in strategy_fields()
               if flags.get(n) is not None and n not in taken and n != "slow_learner"]
    if ignored:
        log.warning("--algo %s does not use %s: ignored", algo, ", ".join(ignored))
    return {**{n: flags[n] for n in taken if flags.get(n) is not None},
            **_parse_options(taken, items)}


def _parse_options(taken: list[str], items: tuple[str, ...]) -> dict[str, Any]:
    """``NAME=VALUE`` pairs typed as asrdist-train types them. Only the strategy's own options
    are taken: those named like training options have flags of their own (--seed,
    --batch-size), and the options of real exchanges (timeouts, distance sampling, a slow
    learner) mean nothing to the simulator, whose slow learner is --slow-learner."""
    out: dict[str, Any] = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or name not in taken:
            hint = "; a slow learner is --slow-learner" if name == "slow_learner" else ""
            raise click.BadParameter(f"{item!r}: expected NAME=VALUE, NAME one of "
                                     f"{', '.join(taken) or 'none'}{hint}",
                                     param_hint="--option")
        try:
            out[name] = coerce_option(name, value, f"-O {item}")
        except AsrdistError as e:
            raise click.BadParameter(str(e), param_hint="--option") from None
    return out


if __name__ == "__main__":
    main()
