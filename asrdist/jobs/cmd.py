"""``--cmd``: where a stage's ``--nj`` jobs run, written as a Kaldi recipe's cmd.sh writes it.

``run.pl`` runs them on this machine (:class:`asrdist.jobs.LocalRunner`), ``slurm.pl`` submits
them to Slurm (:class:`asrdist.jobs.slurm.SlurmRunner`), with Kaldi's options: ``--mem 4G``,
``--time 1:00:00``, ``--num-threads N``, ``--gpu N``, ``--max-jobs-run N`` (and ``--partition
P``). A recipe's cmd.sh switches a line between the two by its first word alone: run.pl takes
and ignores the resource options, as Kaldi's does.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

from asrdist.errors import AsrdistError
from asrdist.jobs import LOCAL, Runner

RUNNERS = ("run.pl", "slurm.pl")
_MEM = re.compile(r"^\d+[KMGT]?$", re.IGNORECASE)  # sbatch --mem: a size, M by default
_TIME = re.compile(r"^(\d+-)?\d+(:\d+){0,2}$")  # sbatch --time: [D-]HH:MM:SS and its shorter forms


@dataclass(frozen=True)
class Cmd:
    """A parsed ``--cmd``."""

    runner: str = "run.pl"
    mem: str | None = None
    time: str | None = None
    num_threads: int = 1
    gpu: int = 0
    partition: str | None = None
    max_jobs_run: int | None = None

    def make(self, log_dir: str | Path) -> Runner:
        """The runner; a cluster job's log goes to ``log_dir/<task>.<n>.log``."""
        if self.runner == "run.pl":
            return LOCAL
        from asrdist.jobs.slurm import SlurmRunner  # a local run never needs it

        return SlurmRunner(Path(log_dir), self)


def _positive(value: str, option: str, minimum: int = 1) -> int:
    if not value.isdigit() or int(value) < minimum:
        raise AsrdistError(f"{option} {value}: give a whole number >= {minimum}")
    return int(value)


def _matching(pattern: re.Pattern[str], example: str) -> Callable[[str, str], str]:
    def check(value: str, option: str) -> str:
        if not pattern.match(value):
            raise AsrdistError(f"{option} {value}: not a Slurm value (e.g. {option} {example})")
        return value
    return check


_OPTIONS: dict[str, tuple[str, Callable[[str, str], Any]]] = {
    "--mem": ("mem", _matching(_MEM, "4G")),
    "--time": ("time", _matching(_TIME, "1:00:00")),
    "--num-threads": ("num_threads", _positive),
    "--gpu": ("gpu", lambda v, o: _positive(v, o, 0)),
    "--partition": ("partition", lambda v, _o: v),
    "--max-jobs-run": ("max_jobs_run", _positive),
}


def parse_cmd(text: str) -> Cmd:
    """``text`` as cmd.sh writes it ("slurm.pl --mem 4G --time 1:00:00"); an unknown runner or
    option, or a bad value, is an AsrdistError of one line."""
    try:
        words = shlex.split(text)
    except ValueError as e:
        raise AsrdistError(f"{text!r}: {e}") from None
    if not words:
        raise AsrdistError("empty: give run.pl or slurm.pl [options]")
    runner = Path(words[0]).name  # utils/slurm.pl as well as slurm.pl
    if runner == "queue.pl":
        raise AsrdistError("queue.pl (Grid Engine) is not implemented: use slurm.pl or run.pl")
    if runner not in RUNNERS:
        raise AsrdistError(f"unknown runner {words[0]!r}: use run.pl or slurm.pl")
    values: dict[str, Any] = {}
    rest = words[1:]
    while rest:
        option, _, value = rest.pop(0).partition("=")
        if option not in _OPTIONS:
            raise AsrdistError(f"{runner}: unknown option {option!r} (it takes "
                               f"{', '.join(_OPTIONS)})")
        if not value:
            if not rest:
                raise AsrdistError(f"{runner} {option}: needs a value")
            value = rest.pop(0)
        field, check = _OPTIONS[option]
        values[field] = check(value, option)
    if runner == "run.pl" and "max_jobs_run" in values:
        raise AsrdistError("run.pl --max-jobs-run: not supported here (run.pl starts every "
                           "--nj job at once): lower --nj, or use slurm.pl")
    return Cmd(runner, **values)


def _callback(_ctx: click.Context, _param: click.Parameter, value: str) -> Cmd:
    try:
        return parse_cmd(value)
    except AsrdistError as e:
        raise click.BadParameter(e.message) from None


def cmd_option(f: Callable[..., Any]) -> Callable[..., Any]:
    """``--cmd`` for a stage with ``--nj`` jobs; the command gets a :class:`Cmd`."""
    return click.option(
        "--cmd", default="run.pl", show_default=True, callback=_callback,
        help="Where the --nj jobs run, as Kaldi's cmd.sh says it: 'run.pl' (this machine) or "
             "'slurm.pl [--mem 4G] [--time 1:00:00] [--num-threads N] [--gpu N] "
             "[--partition P] [--max-jobs-run N]' (sbatch; each job's log in log/TASK.N.log "
             "of the output dir).")(f)
