"""asrdist-train: features + pdf targets -> a run dir (config.yaml, metrics.jsonl, final.pt).

Every option of asrdist.train.config.TrainConfig is a flag here (``chunk_len`` ->
``--chunk-len``); values come from the defaults, then ``--config FILE`` (YAML), then flags.
The strategies' options (--exchange-timeout, --slow-learner, --avg-period, ...) come from the
strategy registry when the command runs, so a strategy registered later (a module named in
ASRDIST_STRATEGIES) brings its flags along; each strategy gets those it takes, and one set for
a strategy that does not take it is ignored with a warning, so one config file serves every
--algo. Run directly for one learner, or under torchrun / mpiexec / srun for several.
"""

from __future__ import annotations

import logging
import socket
import sys
import traceback
from typing import Any

import click
import torch

from asrdist.cli import AsrdistCommand, command
from asrdist.errors import AsrdistError, first_line
from asrdist.parallel import health, launch, registry, supervise
from asrdist.parallel.preempt import STOPPED_STATUS, Preemption, parse_signals
from asrdist.parallel.strategy import Learner, Strategy
from asrdist.train.config import (
    TrainConfig,
    all_fields,
    field_kind,
    make_config,
    validate_for_world,
)
from asrdist.train.trainer import train

log = logging.getLogger(__name__)

_PY_TYPES = {"int": int, "float": float, "str": str}


class _AlgoChoice(click.Choice):
    """``--algo``'s choices are the registry's names when the command runs, not at import."""

    def __init__(self) -> None:
        super().__init__([])

    @property
    def choices(self) -> list[str]:  # type: ignore[override]
        return registry.algo_names()

    @choices.setter
    def choices(self, _: Any) -> None:
        pass


def _field_options() -> list[click.Option]:
    """One option per training and strategy option; None means 'not given' so YAML values
    stay."""
    options = []
    for name, f in all_fields().items():
        flag = "--" + name.replace("_", "-")
        shown = f.default if f.default != "" else "none"
        help_text = f"{f.metadata['help']} [default: {shown}]"
        kind = field_kind(f)
        if kind == "bool":
            decls = [f"{flag}/--no-{flag[2:]}", name]
            options.append(click.Option(decls, default=None, help=help_text))
            continue
        if name == "algo":
            kind_type: click.ParamType = _AlgoChoice()
        elif f.metadata["choices"]:
            kind_type = click.Choice(f.metadata["choices"])
        else:
            kind_type = click.types.convert_type(_PY_TYPES[kind])
        options.append(click.Option([flag, name], type=kind_type, default=None, help=help_text))
    return options


class _TrainCommand(AsrdistCommand):
    """A command whose option flags are made when it runs, from the registry as it is then
    (once per invocation: click asks for the parameters several times)."""

    def get_params(self, ctx: click.Context) -> list[click.Parameter]:
        if "asrdist.options" not in ctx.meta:
            ctx.meta["asrdist.options"] = _field_options()
        made = ctx.meta["asrdist.options"]
        return [*self.params, *made, *super().get_params(ctx)[len(self.params):]]


def learner_context(config: TrainConfig) -> tuple[Learner, str]:
    """This process as a learner, and its device.

    One learner, without any process group, unless a launcher says world size > 1; then the
    options are checked against the world size and torch.distributed is initialised here
    (asrdist.parallel.launch, every collective bounded by --exchange-timeout); each learner takes
    the GPU of its local rank.
    """
    denv = launch.detect_env()
    world_size = denv.world_size if denv is not None else 1
    validate_for_world(config, world_size)
    if denv is None or world_size <= 1:
        return Learner(node=denv.node if denv else socket.gethostname()), config.device
    denv = launch.init_from_env(timeout_s=config.option("exchange_timeout"))
    device = config.device
    if device == "cuda" and torch.cuda.is_available():
        device = f"cuda:{denv.local_rank % torch.cuda.device_count()}"
    return Learner(denv.rank, denv.world_size, denv.local_rank, denv.node), device


def make_strategy(config: TrainConfig, learner: Learner | None = None) -> Strategy:
    """The --algo strategy with the options it takes; other strategy options set to a
    non-default value are ignored with a warning (a config file may serve several --algo)."""
    try:
        options, ignored = config.options_for(config.algo)
        if ignored:
            log.warning("--algo %s does not use %s: ignored", config.algo, ", ".join(ignored))
        return registry.spec(config.algo).make(learner or Learner(), options)
    except (ValueError, TypeError) as e:
        raise AsrdistError(f"--algo {config.algo}: {e}") from e


@command(cls=_TrainCommand, show_default=False, max_content_width=100)
@click.option("--config", "config_path", type=click.Path(dir_okay=False),
              help="YAML file of options (keys as the flags, with _ or -); flags override it")
def main(config_path: str | None, **flags: Any) -> None:
    """Train a BLSTM or DNN acoustic model on Kaldi/lhotse features and ingested pdf targets."""
    given = {k: v for k, v in flags.items() if v is not None}
    config = make_config(config_path, given)
    signals = parse_signals(config.stop_signals)
    denv = launch.detect_env()
    if supervise.supervised():
        supervise.die_with_supervisor()
    elif denv is not None and denv.launcher == "mpi" and denv.world_size > 1:
        sys.exit(supervise.run_supervised(denv.rank, signals))  # see asrdist.parallel.supervise
    preemption = Preemption(signals)
    learner, config.device = learner_context(config)
    strategy = make_strategy(config, learner)
    try:
        result = train(config, strategy, learner.rank, learner.world_size, preemption)
    except Exception as exc:  # noqa: BLE001 - any learner's failure ends the job, first named
        preemption.restore()
        if learner.world_size == 1:
            raise
        if health.store_lost(exc):
            health.abort(learner.rank, f"{health.STORE_LOST}: {first_line(exc)}", post=False)
        if health.other_report(learner.rank) is not None:  # a consequence: name the cause
            health.abort(learner.rank, f"stopped after another learner failed "
                                       f"({first_line(exc)[:120]})")
        if not isinstance(exc, (AsrdistError, OSError)) and not health.peer_lost(exc):
            traceback.print_exc()
        health.fail(learner.rank, exc.message if isinstance(exc, AsrdistError)
                    else f"{type(exc).__name__}: {first_line(exc)}")
    finally:
        if torch.distributed.is_available() and torch.distributed.is_initialized():
            torch.distributed.destroy_process_group()
    if result.stopped_by is not None:
        click.echo(f"asrdist-train: learner {learner.rank} stopped by {result.stopped_by} at "
                   f"step {result.steps}, checkpointed; continue with --resume "
                   f"(exit status {STOPPED_STATUS})", err=True)
        sys.exit(STOPPED_STATUS)  # handlers kept: srun's SIGTERM to a slower learner is moot
    preemption.restore()
    if result.final is not None:
        figures = ", ".join(f"{k} {v:.4f}" for k, v in result.heldout.items())
        click.echo(f"{result.final}{': ' + figures if figures else ''}", err=True)
