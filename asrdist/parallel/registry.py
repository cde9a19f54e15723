"""``--algo`` name -> strategy factory and the options it takes; the trainer builds its strategy
only through here."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from asrdist.parallel.strategy import Single, Strategy

StrategyFactory = Callable[..., Strategy]

# Options every multi-learner strategy takes; each one also takes its own (below).
COMMON = ("timeout_s", "slow_learner", "distance_every_s")


def _ssgd(**options: Any) -> Strategy:
    from asrdist.parallel.ssgd import SSGD

    return SSGD(**options)


def _adpsgd(ring: str, delay1: bool) -> StrategyFactory:
    def make(**options: Any) -> Strategy:
        from asrdist.parallel.adpsgd import ADPSGD

        return ADPSGD(ring=ring, delay1=delay1, **options)

    return make


def _hadpsgd(**options: Any) -> Strategy:
    from asrdist.parallel.hadpsgd import HADPSGD

    if "hadpsgd_variant" in options:
        options["variant"] = options.pop("hadpsgd_variant")
    return HADPSGD(**options)


def _ma(**options: Any) -> Strategy:
    from asrdist.parallel.ma import ModelAveraging

    return ModelAveraging(**options)


# name -> (factory, the option names it takes); a new strategy is one more line here
_FACTORIES: dict[str, tuple[StrategyFactory, tuple[str, ...]]] = {
    "single": (lambda: Single(), ()),
    "ssgd": (_ssgd, COMMON),
    "adpsgd-fixed": (_adpsgd("fixed", False), COMMON + ("seed",)),
    "adpsgd-random": (_adpsgd("random", False), COMMON + ("seed",)),
    "adpsgd-delay1": (_adpsgd("fixed", True), COMMON + ("seed",)),
    "hadpsgd": (_hadpsgd, COMMON + ("seed", "learners_per_node", "hadpsgd_variant")),
    "ma": (_ma, COMMON + ("avg_period",)),
}


def algo_names() -> list[str]:
    """The names ``--algo`` accepts."""
    return sorted(_FACTORIES)


def _entry(name: str) -> tuple[StrategyFactory, tuple[str, ...]]:
    try:
        return _FACTORIES[name]
    except KeyError:
        choices = ", ".join(algo_names())
        raise ValueError(f"unknown --algo {name!r}; choose one of {choices}") from None


def options_of(name: str) -> tuple[str, ...]:
    """The option names strategy ``name`` takes (the trainer passes it only these)."""
    return _entry(name)[1]


def make_strategy(name: str, **options: Any) -> Strategy:
    """Build the strategy called ``name``; an option it does not take is an error (a misspelt
    option is never ignored); None values are left to the strategy's defaults."""
    factory, accepted = _entry(name)
    unknown = sorted(set(options) - set(accepted))
    if unknown:
        takes = ", ".join(accepted) if accepted else "no options"
        raise ValueError(f"unknown option(s) {', '.join(unknown)}; {name} takes {takes}")
    return factory(**{k: v for k, v in options.items() if v is not None})
