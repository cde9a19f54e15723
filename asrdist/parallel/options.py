"""Strategy options: each strategy declares a frozen dataclass of them, and owns their checks.

A field's name is its YAML key and, with ``_`` -> ``-``, its asrdist-train flag; its metadata
holds the help text and the allowed choices. The dataclass checks its values in
``__post_init__`` (raising :class:`AsrdistError` naming the flag), so a bad value is refused
where the option is defined, whichever strategy the run uses. A field named like a training
option (``seed``) is not a flag of its own: the strategy gets that option's value.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from asrdist.errors import AsrdistError
from asrdist.parallel.slow import parse_slow_learner


def option(default: Any, help: str, choices: tuple[str, ...] | None = None) -> Any:
    """A dataclass field carrying its flag's help text and choices."""
    return field(default=default, metadata={"help": help, "choices": choices})


def training_option(default: Any, help: str) -> Any:
    """A field named like a training option (``seed``, ``batch_size``): no flag of its own,
    the strategy gets the run's value; ``default`` serves a strategy made outside a run."""
    return field(default=default, metadata={"help": help, "choices": None, "training": True})


def flag(name: str) -> str:
    """The command-line flag of option ``name``."""
    return "--" + name.replace("_", "-")


def require(ok: bool, name: str, value: Any, what: str) -> None:
    """Refuse ``value`` of option ``name`` unless ``ok``; ``what``: "be positive", ..."""
    if not ok:
        raise AsrdistError(f"{flag(name)} must {what}, got {value}")


@dataclass(frozen=True)
class NoOptions:
    """The options of a strategy that takes none."""


@dataclass(frozen=True)
class CommonOptions:
    """Options every multi-learner strategy takes."""

    exchange_timeout: float = option(120.0, "seconds a rendezvous or any exchange may take; "
                                     "then the job ends naming the lost learner")
    slow_learner: str = option("", "RANK:FACTOR: make learner RANK FACTOR times slower "
                               "(straggler studies)")
    distance_every: float = option(30.0, "seconds between samples of each learner's distance "
                                   "to the learners' mean (0 = off)")

    def __post_init__(self) -> None:
        require(self.exchange_timeout > 0, "exchange_timeout", self.exchange_timeout,
                "be positive")
        require(self.distance_every >= 0, "distance_every", self.distance_every,
                "not be negative")
        parse_slow_learner(self.slow_learner)

    def check_world(self, world_size: int) -> None:
        """Refuse values that do not fit the number of learners (before any rendezvous)."""
        slow = parse_slow_learner(self.slow_learner)
        if slow is not None and slow[0] >= world_size:
            raise AsrdistError(f"--slow-learner {self.slow_learner}: there is no learner "
                               f"{slow[0]} among {world_size} (ranks 0..{world_size - 1})")
