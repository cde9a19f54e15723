"""``--algo`` name -> strategy factory; the trainer builds its strategy only through here."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from asrdist.dist.strategy import Single, Strategy

StrategyFactory = Callable[..., Strategy]

_FACTORIES: dict[str, StrategyFactory] = {"single": lambda **_: Single()}

# Options every multi-learner strategy takes (``--algo-opt KEY=VALUE``); each factory also
# takes its own (below). An unknown key is an error, so a misspelt option is never ignored.
_COMMON = ("timeout_s", "slow_learner", "distance_every_s")


def _pick(options: dict[str, Any], *own: str) -> dict[str, Any]:
    unknown = sorted(set(options) - set(_COMMON + own))
    if unknown:
        raise ValueError(
            f"unknown option(s) {', '.join(unknown)}; this strategy takes "
            f"{', '.join(_COMMON + own)}"
        )
    return {k: v for k, v in options.items() if v is not None}


def _ssgd(**options: Any) -> Strategy:
    from asrdist.dist.ssgd import SSGD

    return SSGD(**_pick(options))


def _adpsgd(ring: str, delay1: bool) -> StrategyFactory:
    def make(**options: Any) -> Strategy:
        from asrdist.dist.adpsgd import ADPSGD

        return ADPSGD(ring=ring, delay1=delay1, **_pick(options, "seed"))

    return make


def _hadpsgd(**options: Any) -> Strategy:
    from asrdist.dist.hadpsgd import HADPSGD

    picked = _pick(options, "seed", "learners_per_node", "hadpsgd_variant")
    if "hadpsgd_variant" in picked:
        picked["variant"] = picked.pop("hadpsgd_variant")
    return HADPSGD(**picked)


def _ma(**options: Any) -> Strategy:
    from asrdist.dist.ma import ModelAveraging

    return ModelAveraging(**_pick(options, "avg_period"))


_FACTORIES.update({
    "ssgd": _ssgd,
    "adpsgd-fixed": _adpsgd("fixed", False),
    "adpsgd-random": _adpsgd("random", False),
    "adpsgd-delay1": _adpsgd("fixed", True),
    "hadpsgd": _hadpsgd,
    "ma": _ma,
})


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
