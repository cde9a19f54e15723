"""What a comparison runs: strategies (an --algo with its own options) and scenarios (which
learners straggle), as written on asrdist-compare's command line.

A strategy is ``NAME`` or ``NAME:OPTION=VALUE[,OPTION=VALUE...]`` (the strategy's options, typed
as asrdist-train types them), so one table may hold two settings of one strategy. A scenario is
``none`` or ``straggler:RANKxFACTOR[,RANKxFACTOR...]``: those learners' compute is FACTOR times
slower (several stragglers, each named by rank).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from asrdist.errors import AsrdistError
from asrdist.parallel import registry
from asrdist.train.config import coerce_option

_STRAGGLER = re.compile(r"^(\d+)x(\d+(?:\.\d*)?)$")


@dataclass(frozen=True)
class Arm:
    """One strategy of a comparison: its label (as written), --algo and options."""

    label: str
    algo: str
    options: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Scenario:
    """One scenario of a comparison: its label (as written) and its slow learners."""

    label: str
    slow: dict[int, float] = field(default_factory=dict)


def parse_arm(text: str) -> Arm:
    """``NAME[:OPTION=VALUE,...]`` -> :class:`Arm`; unknown names are one-line errors."""
    algo, _, rest = text.partition(":")
    try:
        taken = registry.options_of(algo)
    except ValueError as e:
        raise AsrdistError(f"--algo {text!r}: {e}") from None
    options: dict[str, Any] = {}
    for item in filter(None, (p.strip() for p in rest.split(","))):
        name, sep, value = item.partition("=")
        if not sep or name not in taken:
            raise AsrdistError(f"--algo {text!r}: {item!r}: expected OPTION=VALUE, OPTION one "
                               f"of {', '.join(sorted(taken)) or 'none'}")
        options[name] = coerce_option(name, value, f"--algo {text}")
    return Arm(text, algo, options)


def parse_scenario(text: str) -> Scenario:
    """``none`` or ``straggler:RANKxFACTOR[,...]`` -> :class:`Scenario`."""
    if text == "none":
        return Scenario(text)
    kind, _, rest = text.partition(":")
    slow: dict[int, float] = {}
    for item in rest.split(",") if kind == "straggler" else [text]:
        found = _STRAGGLER.match(item.strip())
        if kind != "straggler" or found is None:
            raise AsrdistError(f"--scenario {text!r}: expected 'none' or "
                               "'straggler:RANKxFACTOR[,RANKxFACTOR...]', e.g. straggler:1x3")
        rank, factor = int(found[1]), float(found[2])
        if factor < 1 or rank in slow:
            raise AsrdistError(f"--scenario {text!r}: a FACTOR is at least 1 and a learner "
                               "is named once")
        slow[rank] = factor
    return Scenario(text, slow)


def check_learners(scenarios: list[Scenario], learners: int) -> None:
    """Refuse a straggler that is not among ``learners`` before any run."""
    for s in scenarios:
        missing = [r for r in s.slow if r >= learners]
        if missing:
            raise AsrdistError(f"--scenario {s.label}: there is no learner {missing[0]} among "
                               f"{learners} (ranks 0..{learners - 1})")
