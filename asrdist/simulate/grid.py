"""What a comparison runs: strategies (an --algo with its own options) and scenarios (which
learners straggle, which are lost), as written on asrdist-compare's command line.

A strategy is ``NAME`` or ``NAME:OPTION=VALUE[,OPTION=VALUE...]`` (the strategy's options, typed
as asrdist-train types them), so one table may hold two settings of one strategy. A scenario is
``none`` or parts joined by ``+``:

- ``straggler:RANKxFACTOR[,RANKxFACTOR...]``: those learners' compute is FACTOR times slower
  (several stragglers, each named by rank);
- ``lost:RANK@FRACTION[,RANK@FRACTION...]``: learner RANK is lost for good (its process killed)
  once it has taken that fraction of its steps (``int(FRACTION * steps)``, at least one), a
  fraction in (0, 1). What follows is what real processes do
  (:func:`asrdist.simulate.run.simulate`): an elastic strategy (the registry's ``elastic``)
  drops it and the others go on, a fail-stop one ends the run there, marked failed.

So ``straggler:0x4+lost:5@0.5`` is learner 0 four times slower and learner 5 lost halfway.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from asrdist.errors import AsrdistError
from asrdist.parallel import registry
from asrdist.train.config import coerce_option

_STRAGGLER = re.compile(r"^(\d+)x(\d+(?:\.\d*)?)$")
_LOST = re.compile(r"^(\d+)@(\d*\.?\d+)$")
GRAMMAR = ("'none' or 'straggler:RANKxFACTOR[,...]' and/or 'lost:RANK@FRACTION[,...]' joined "
           "by '+', e.g. straggler:0x4+lost:5@0.5")


@dataclass(frozen=True)
class Arm:
    """One strategy of a comparison: its label (as written), --algo and options."""

    label: str
    algo: str
    options: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Scenario:
    """One scenario of a comparison: its label (as written), its slow learners and its lost
    learners (rank -> the fraction of its steps it takes)."""

    label: str
    slow: dict[int, float] = field(default_factory=dict)
    lost: dict[int, float] = field(default_factory=dict)


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
    """``none`` or ``straggler:...`` and/or ``lost:...`` joined by ``+`` -> :class:`Scenario`."""
    if text == "none":
        return Scenario(text)
    found: dict[str, dict[int, float]] = {}
    for part in text.split("+"):
        kind, _, rest = part.strip().partition(":")
        pattern = {"straggler": _STRAGGLER, "lost": _LOST}.get(kind)
        if pattern is None or kind in found:
            raise AsrdistError(f"--scenario {text!r}: expected {GRAMMAR}")
        named = found[kind] = {}
        for item in rest.split(","):
            match = pattern.match(item.strip())
            if match is None:
                raise AsrdistError(f"--scenario {text!r}: {item.strip()!r}: expected {GRAMMAR}")
            rank, value = int(match[1]), float(match[2])
            if rank in named:
                raise AsrdistError(f"--scenario {text!r}: learner {rank} is named twice")
            if kind == "straggler" and value < 1:
                raise AsrdistError(f"--scenario {text!r}: a straggler's FACTOR is at least 1")
            if kind == "lost" and not 0 < value < 1:
                raise AsrdistError(f"--scenario {text!r}: a lost learner's FRACTION of its "
                                   "steps is in (0, 1)")
            named[rank] = value
    return Scenario(text, found.get("straggler", {}), found.get("lost", {}))


def check_learners(scenarios: list[Scenario], learners: int) -> None:
    """Refuse a straggler or lost learner that is not among ``learners`` before any run."""
    for s in scenarios:
        missing = sorted(r for r in [*s.slow, *s.lost] if r >= learners)
        if missing:
            raise AsrdistError(f"--scenario {s.label}: there is no learner {missing[0]} among "
                               f"{learners} (ranks 0..{learners - 1})")
