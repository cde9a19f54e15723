"""Thin click commands, one per console script, over the library.

Every command is made with :func:`command`, so an :class:`~asrdist.errors.AsrdistError` (or an
OSError: a full disk, a missing file) raised anywhere below it becomes click's one-line
``Error: <message>`` and exit status 1, and every command logs alike (:data:`LOG_FORMAT`).
"""

from __future__ import annotations

import errno
import logging
import os
from collections.abc import Callable
from typing import Any

import click

from asrdist.errors import AsrdistError

# torch's C++ warnings: a store call failing once learner 0 is gone logs a whole C++ stack
# before asrdist's one line naming the lost learner. TORCH_CPP_LOG_LEVEL=WARNING shows them.
os.environ.setdefault("TORCH_CPP_LOG_LEVEL", "ERROR")

# One line per record with its time and level, so the logs of a Slurm job's steps (and of its
# learners, interleaved) can be told apart and put in order.
LOG_FORMAT = "%(asctime)s %(levelname)s %(message)s"


class AsrdistCommand(click.Command):
    """A click command that reports AsrdistError and OSError like click's own usage errors
    (parsing raises neither: only the command's body reaches the library), and that sets
    logging up before its body runs."""

    def invoke(self, ctx: click.Context) -> Any:
        logging.basicConfig(level=logging.INFO, format=LOG_FORMAT)
        try:
            return super().invoke(ctx)
        except AsrdistError as e:
            raise click.ClickException(e.message) from e
        except OSError as e:  # a full disk, a vanished file: the file and the reason, one line
            if e.errno == errno.EPIPE:  # click's own handling of a closed pipe
                raise
            where = f"{e.filename}: " if e.filename else ""
            raise click.ClickException(f"{where}{e.strerror or e}") from e


def command(
    cls: type[AsrdistCommand] = AsrdistCommand, **context_settings: Any
) -> Callable[[Callable[..., Any]], click.Command]:
    """``@click.command`` for asrdist: -h/--help, AsrdistError as a one-line error."""
    settings = {"help_option_names": ["-h", "--help"], **context_settings}
    return click.command(cls=cls, context_settings=settings)


def number_list(text: str, option: str) -> tuple[float, ...]:
    """Numbers separated by spaces or commas ('7 10 13', '0.9,1.1'), for list-valued options."""
    try:
        return tuple(float(x) for x in text.replace(",", " ").split())
    except ValueError:
        raise click.BadParameter(f"{text!r}: give numbers", param_hint=option) from None
