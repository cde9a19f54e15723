"""``--algo`` name -> strategy factory; the trainer builds its strategy only through here."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from asrdist.dist.strategy import Single, Strategy

StrategyFactory = Callable[..., Strategy]

_FACTORIES: dict[str, StrategyFactory] = {"single": lambda **_: Single()}


def register(name: str, factory: StrategyFactory) -> None:
    """Make ``factory(**options)`` available as ``--algo name``."""
    _FACTORIES[name] = factory


def algo_names() -> list[str]:
    """The names ``--algo`` accepts."""
    return sorted(_FACTORIES)


def make_strategy(name: str, **options: Any) -> Strategy:
    """Build the strategy called ``name`` with the trainer's options (learners, periods, ...)."""
    try:
        factory = _FACTORIES[name]
    except KeyError:
        choices = ", ".join(algo_names())
        raise ValueError(f"unknown --algo {name!r}; choose one of {choices}") from None
    return factory(**options)
