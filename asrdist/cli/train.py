"""asrdist-train: features + pdf targets -> a run dir (config.yaml, metrics.jsonl, final.pt).

Every option of asrdist.train.config.TrainConfig is a flag here (``chunk_len`` ->
``--chunk-len``), made from its declaration (asrdist.cli.options); values come from the
defaults, then ``--config FILE`` (YAML), then flags.
The strategies' options (--exchange-timeout, --slow-learner, --avg-period, ...) come from the
strategy registry when the command runs, so a strategy registered later (a module named in
ASRDIST_STRATEGIES) brings its flags along; each strategy gets those it takes, and one set for
a strategy that does not take it is ignored with a warning, so one config file serves every
--algo. Run directly for one learner, or under torchrun / mpiexec / srun for several: each then
takes the GPU of its local rank (asrdist.parallel.launch.rendezvous), runs under a supervisor where
mpiexec started it (asrdist.parallel.launch.supervise), and its failure ends the job, named
(asrdist.parallel.launch.failure).
"""

from __future__ import annotations

import logging
import signal
import sys
from typing import Any

import click

import asrdist.cli.early_signals as early_signals  # first: stop signals while torch imports
from asrdist.cli import command
from asrdist.cli.options import AlgoChoice, click_option, derived_command
from asrdist.errors import AsrdistError
from asrdist.options import ignored_flags
from asrdist.parallel import registry
from asrdist.parallel.launch.learner import run_learner
from asrdist.parallel.processes.preempt import STOPPED_STATUS, Preemption, parse_signals
from asrdist.parallel.processes.transport import with_transport
from asrdist.parallel.strategy import Learner, Strategy
from asrdist.stage import Skipped
from asrdist.train.config import (
    TrainConfig,
    all_fields,
    make_config,
    validate_for_world,
)
from asrdist.train.trainer import train

log = logging.getLogger(__name__)

def _field_options() -> list[click.Option]:
    """One flag per training and strategy option, from their declarations; None means 'not
    given' so YAML values stay."""
    return [click_option(name, f, AlgoChoice() if name == "algo" else None)
            for name, f in all_fields().items()]


def make_strategy(config: TrainConfig, learner: Learner | None = None) -> Strategy:
    """The --algo strategy with the options it takes, on ``learner``'s transport (one made
    with the run's process options for a learner without); other strategy options set to a
    non-default value are ignored with a warning (a config file may serve several --algo)."""
    try:
        options, ignored = config.options_for(config.algo)
        if ignored:
            log.warning("--algo %s does not use %s: ignored", config.algo, ", ".join(ignored))
        if ignored_flags(config):
            log.warning("this run does not use %s (another model's, optimizer's or objective's): "
                        "ignored",
                        ", ".join(ignored_flags(config)))
        learner = with_transport(learner or Learner(), config.process_options())
        return registry.spec(config.algo).make(learner, options)
    except (ValueError, TypeError) as e:
        raise AsrdistError(f"--algo {config.algo}: {e}") from e


def _elastic(config: TrainConfig) -> None:
    """AsrdistError for --elastic with a fail-stop strategy."""
    if config.option("elastic") and "elastic" not in registry.options_of(config.algo):
        raise AsrdistError(
            f"--elastic: --algo {config.algo} is fail-stop: its collectives need every learner "
            "(a group re-formed without the lost one needs all ranks); use an adpsgd variant, "
            "hadpsgd or diloco-async")


@command(cls=derived_command(_field_options), show_default=False, max_content_width=100)
@click.option("--config", "config_path", type=click.Path(dir_okay=False),
              help="YAML file of options (keys as the flags, with _ or -); flags override it")
def main(config_path: str | None, **flags: Any) -> None:
    """Train a BLSTM or DNN acoustic model on Kaldi/lhotse features and ingested pdf targets."""
    given = {k: v for k, v in flags.items() if v is not None}
    config = make_config(config_path, given)
    _elastic(config)
    signals = parse_signals(config.stop_signals)
    early = early_signals.take(signals)

    def work(learner: Learner, device: str, preemption: Preemption) -> None:
        config.device = device
        result = train(config, make_strategy(config, learner), learner, preemption)
        if isinstance(result, Skipped):  # done already: asrdist.stage logged the skip line
            return
        if result.stopped_by is not None:
            click.echo(f"asrdist-train: learner {learner.rank} stopped by {result.stopped_by} "
                       f"at step {result.steps}, checkpointed; continue with --resume (exit "
                       f"status {STOPPED_STATUS})", err=True)
            # a SIGTERM now (srun's or torchrun's to a slower learner, once one has exited)
            # is moot: ignored, also while the interpreter exits (it puts default handlers
            # back)
            for sig in (signal.SIGTERM, signal.SIGUSR1):
                signal.signal(sig, signal.SIG_IGN)
            sys.exit(STOPPED_STATUS)
        if result.final is not None:
            figures = ", ".join(f"{k} {v:.4f}" for k, v in result.heldout.items())
            click.echo(f"{result.final}{': ' + figures if figures else ''}", err=True)

    run_learner(config.device, config.process_options(), work, signals, early,
                lambda world_size: validate_for_world(config, world_size), config.out)


if __name__ == "__main__":
    main()
