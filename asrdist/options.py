"""Options, declared once: a dataclass field carries an option's default, help, choices and check.

Every component with options (a strategy, the model, SpecAugment, the optimizer, the learning-
rate schedule, the simulator's speed model, the trainer) declares them as fields made with
:func:`option` in a frozen dataclass deriving from :class:`Options`. Everything else is derived
from those fields: the YAML keys and flags (a field's public name, with ``_`` -> ``-`` for the
flag; the field's name unless it declares another with ``name=``), the help text, the defaults
and the checks, run when the dataclass is made, so a bad value is refused in one style
(:func:`require`: ``--lr must be positive, got -1``) wherever it comes from. A dataclass that
offers another component's option (the trainer's config offers the model's ``--layers``) takes
the field with :func:`option_of`, so the declaration stays in one place.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from asrdist.errors import AsrdistError


@dataclass(frozen=True)
class Check:
    """A rule a value must follow: ``ok(value)``, and what it must do, for the error."""

    ok: Callable[[Any], bool]
    what: str  # "be positive", "not be negative", ...


POSITIVE = Check(lambda v: v > 0, "be positive")
NON_NEGATIVE = Check(lambda v: v >= 0, "not be negative")


def at_least(low: float) -> Check:
    return Check(lambda v: v >= low, f"be at least {low:g}")


def in_range(low: float, high: float) -> Check:
    """``low <= value < high``."""
    return Check(lambda v: low <= v < high, f"be in [{low:g}, {high:g})")


def option(default: Any, help: str, choices: tuple[str, ...] | None = None,
           check: Check | None = None, name: str | None = None) -> Any:
    """A dataclass field declaring one option: its default, help text, the values it may take
    (``choices`` or ``check``) and, when it differs from the field's, its public name."""
    return field(default=default, metadata={"help": help, "choices": choices, "check": check,
                                            "name": name})


def public_name(f: dataclasses.Field) -> str:
    """The option's YAML key (its flag with ``_`` -> ``-``)."""
    return f.metadata.get("name") or f.name


def flag(name: str) -> str:
    """The command-line flag of option ``name``."""
    return "--" + name.replace("_", "-")


def require(ok: bool, name: str, value: Any, what: str) -> None:
    """Refuse ``value`` of option ``name`` unless ``ok``; ``what``: "be positive", ..."""
    if not ok:
        raise AsrdistError(f"{flag(name)} must {what}, got {value}")


def check_value(name: str, f: dataclasses.Field, value: Any) -> None:
    """Refuse ``value`` of option ``name`` unless its declaration allows it."""
    choices = f.metadata.get("choices")
    if choices and value not in choices:
        raise AsrdistError(f"{flag(name)} {value!r}: choose one of {', '.join(choices)}")
    check = f.metadata.get("check")
    if check is not None:
        require(check.ok(value), name, value, check.what)


def declared(cls: Any) -> dict[str, dataclasses.Field]:
    """The options a dataclass (or an instance) declares, by public name; fields without help
    text (a speed model's slow-learner table) are not options."""
    return {public_name(f): f for f in dataclasses.fields(cls) if "help" in f.metadata}


def check_fields(obj: Any) -> None:
    """Refuse any declared option of ``obj`` whose value its declaration does not allow."""
    for name, f in declared(obj).items():
        check_value(name, f, getattr(obj, f.name))


class Options:
    """Base of the options dataclasses: made, they check every declared field."""

    def __post_init__(self) -> None:
        check_fields(self)


def option_of(cls: type, name: str) -> Any:
    """A field offering ``cls``'s option ``name`` (public name) in another dataclass, under
    that name: the same default, help, choices and check; ``declared_by`` records ``cls``."""
    f = declared(cls)[name]
    return field(default=f.default, metadata={**f.metadata, "name": None, "declared_by": cls})


def make(cls: type, values: Mapping[str, Any]) -> Any:
    """``cls`` made from ``values`` by public name (missing ones take their defaults)."""
    return cls(**{f.name: values[n] for n, f in declared(cls).items() if n in values})


def kind(f: dataclasses.Field) -> str:
    """"int", "float", "str" or "bool", whether or not the annotations are strings."""
    return f.type if isinstance(f.type, str) else f.type.__name__


def coerce(name: str, f: dataclasses.Field, value: Any, where: str) -> Any:
    """``value`` (YAML's, or a NAME=VALUE string) as option ``name``'s type, or an error naming
    both."""
    want = kind(f)
    bad = AsrdistError(f"{where}: {name}: {value!r} is not a valid {want}")
    if want == "bool":
        if isinstance(value, bool):
            return value
        raise bad
    if want == "int":
        if isinstance(value, bool):
            raise bad
        if isinstance(value, int):
            return value
        if isinstance(value, str) and value.strip().lstrip("-").isdigit():
            return int(value)
        raise bad
    if want == "float":
        if isinstance(value, bool):
            raise bad
        try:
            out = float(value)  # YAML 1.1 reads "1e-3" as a string
        except (TypeError, ValueError):
            raise bad from None
        if not math.isfinite(out):
            raise bad
        return out
    if not isinstance(value, str):
        raise bad
    return value
