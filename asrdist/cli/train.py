"""asrdist-train: features + pdf targets -> a run dir (config.yaml, metrics.jsonl, final.pt).

Every option of asrdist.train.config.TrainConfig is a flag here (``chunk_len`` ->
``--chunk-len``); values come from the defaults, then ``--config FILE`` (YAML), then flags.
The strategy's options (--exchange-timeout, --slow-learner, --avg-period, ...) are options like
any other; each strategy gets those it takes, and one set for a strategy that does not take it
is ignored with a warning, so one config file serves every --algo.
Run directly for one learner, or under torchrun / mpiexec / srun for several.
"""

from __future__ import annotations

import logging
from typing import Any

import click
import torch

from asrdist.cli import command
from asrdist.errors import AsrdistError
from asrdist.parallel import launch, registry
from asrdist.parallel.strategy import Strategy
from asrdist.train.config import FIELDS, TrainConfig, make_config, validate_for_world
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


def _field_options(command: Any) -> Any:
    """Add one option per TrainConfig field; None means 'not given' so YAML values stay."""
    for name, f in reversed(FIELDS.items()):
        flag = "--" + name.replace("_", "-")
        shown = f.default if f.default != "" else "none"
        help_text = f"{f.metadata['help']} [default: {shown}]"
        if f.type == "bool":
            option = click.option(f"{flag}/--no-{flag[2:]}", name, default=None, help=help_text)
        elif name == "algo":
            option = click.option(flag, name, type=_AlgoChoice(), default=None, help=help_text)
        elif f.metadata["choices"]:
            option = click.option(flag, name, type=click.Choice(f.metadata["choices"]),
                                  default=None, help=help_text)
        else:
            option = click.option(flag, name, type=_PY_TYPES[f.type], default=None,
                                  help=help_text)
        command = option(command)
    return command


def learner_context(config: TrainConfig) -> tuple[int, int, str]:
    """(rank, world size, device) of this process.

    One learner, without any process group, unless a launcher says world size > 1; then the
    options are checked against the world size and torch.distributed is initialised here
    (asrdist.parallel.launch, every collective bounded by --exchange-timeout); each learner takes
    the GPU of its local rank.
    """
    denv = launch.detect_env()
    world_size = denv.world_size if denv is not None else 1
    validate_for_world(config, world_size)
    if world_size <= 1:
        return 0, 1, config.device
    denv = launch.init_from_env(timeout_s=config.exchange_timeout)
    device = config.device
    if device == "cuda" and torch.cuda.is_available():
        device = f"cuda:{denv.local_rank % torch.cuda.device_count()}"
    return denv.rank, denv.world_size, device


def make_strategy(config: TrainConfig) -> Strategy:
    """The --algo strategy with the options it takes; other strategy options set to a
    non-default value are ignored with a warning (a config file may serve several --algo)."""
    try:
        options, ignored = config.strategy_options(registry.options_of(config.algo))
        if ignored:
            log.warning("--algo %s does not use %s: ignored", config.algo, ", ".join(ignored))
        return registry.make_strategy(config.algo, **options)
    except (ValueError, TypeError) as e:
        raise AsrdistError(f"--algo {config.algo}: {e}") from e


@command(show_default=False, max_content_width=100)
@click.option("--config", "config_path", type=click.Path(dir_okay=False),
              help="YAML file of options (keys as the flags, with _ or -); flags override it")
@_field_options
def main(config_path: str | None, **flags: Any) -> None:
    """Train a BLSTM or DNN acoustic model on Kaldi/lhotse features and ingested pdf targets."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    given = {k: v for k, v in flags.items() if v is not None}
    config = make_config(config_path, given)
    rank, world_size, device = learner_context(config)
    config.device = device
    strategy = make_strategy(config)
    try:
        result = train(config, strategy, rank, world_size)
    finally:
        if torch.distributed.is_available() and torch.distributed.is_initialized():
            torch.distributed.destroy_process_group()
    if result.final is not None:
        figures = ", ".join(f"{k} {v:.4f}" for k, v in result.heldout.items())
        click.echo(f"{result.final}{': ' + figures if figures else ''}", err=True)
