"""Options, declared once: a dataclass field carries an option's default, help, choices and check.

Every component with options (a strategy, the model, SpecAugment, the optimizer, the learning-
rate schedule, the simulator's speed model, the trainer) declares them as fields made with
:func:`option` in a frozen dataclass deriving from :class:`Options`. A run is composed of its
components' objects (:func:`component` fields), whose options are its own, flat: one
flattener (:func:`paths`) gives every option by its public name, so a declaration stays in one
place. Everything else is derived from those fields: the YAML keys and flags (a field's public
name, with ``_`` -> ``-`` for the flag; the field's name unless it declares another with
``name=``), the help text, the defaults, what a run's identity counts (``fingerprint``) and the
checks, run when the dataclass is made, so a bad value is refused in one style
(:func:`require`: ``--lr must be positive, got -1``) wherever it comes from.
"""

from __future__ import annotations

import dataclasses
import functools
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
POSITIVE_NUMBERS = Check(lambda values: all(v > 0 for v in values), "be positive numbers")


def at_least(low: float) -> Check:
    return Check(lambda v: v >= low, f"be at least {low:g}")


def in_range(low: float, high: float) -> Check:
    """``low <= value < high``."""
    return Check(lambda v: low <= v < high, f"be in [{low:g}, {high:g})")


def option(default: Any, help: str, choices: tuple[str, ...] | None = None,
           check: Check | None = None, name: str | None = None, fingerprint: bool = True,
           resumable: bool = False, when: tuple[str, tuple[str, ...]] | None = None,
           added: bool = False) -> Any:
    """A dataclass field declaring one option: its default, help text, the values it may take
    (``choices`` or ``check``) and, when it differs from the field's, its public name.

    ``fingerprint=False``: the option does not change what a run makes (where it writes, how
    often it logs, how long it waits), so a done run rerun with another value is skipped, and
    a --resume may change it. ``resumable``: a fingerprinted option that a --resume may change
    anyway (an injected straggler: timing, not maths). ``when=(field, values)``: the option is
    used only when its component's ``field`` has one of ``values`` (the Conformer's sizes, for
    ``type`` conformer); otherwise it is no part of the run (:func:`not_taken`). ``added``: an
    option that came after runs were made (``--objective``): at its default it is no part of a
    run's identity, so a run from before it is the same run."""
    return field(default=default, metadata={"help": help, "choices": choices, "check": check,
                                            "name": name, "fingerprint": fingerprint,
                                            "resumable": resumable or not fingerprint,
                                            "when": when, "added": added})


def unrecorded(f: dataclasses.Field, value: Any) -> bool:
    """Whether option ``f`` at ``value`` is left out of a run's identity (``added``, at its
    default)."""
    return bool(f.metadata.get("added")) and value == f.default


def public_name(f: dataclasses.Field) -> str:
    """The option's YAML key (its flag with ``_`` -> ``-``)."""
    return f.metadata.get("name") or f.name


def fingerprinted(f: dataclasses.Field) -> bool:
    """Whether option ``f`` is part of what a run is (see :func:`option`)."""
    return f.metadata.get("fingerprint", True)


def resumable(f: dataclasses.Field) -> bool:
    """Whether a --resume may change option ``f`` without --resume-allow."""
    return f.metadata.get("resumable", False)


def fingerprint(obj: Any) -> dict[str, Any]:
    """``obj``'s declared options that make what it makes, by public name."""
    return {n: value_of(obj, n) for n, f in declared(obj).items() if fingerprinted(f)}


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
    if check is not None and value is not None:  # None: an optional option not given
        require(check.ok(value), name, value, check.what)


def component(cls: type, only: tuple[str, ...] | None = None,
              fixed: Mapping[str, Any] | None = None) -> Any:
    """A field holding component ``cls``'s options object (its defaults unless given): a run
    is composed of its components' objects, and their options are its own, flat, under their
    public names (:func:`declared`, :func:`make`, :func:`flatten`). ``only``: the public names
    of the options the run takes (the others are not its options); ``fixed``: values, by
    field name, of options it does not take (asrdist-pretrain-rbm's model is a sigmoid DNN)."""
    fixed = dict(fixed or {})
    return field(default_factory=lambda: cls(**fixed),
                 metadata={"component": cls, "only": only, "fixed": fixed})


def paths(cls: Any) -> dict[str, tuple[tuple[str, ...], dataclasses.Field]]:
    """Every option of a dataclass (or an instance) by public name, its components' included
    in declaration order, each with its attribute path: the one flattener behind the flags,
    the YAML keys and the identity of a run."""
    out: dict[str, tuple[tuple[str, ...], dataclasses.Field]] = {}
    for f in dataclasses.fields(cls):
        inner = f.metadata.get("component")
        only = f.metadata.get("only")
        found = ({n: ((f.name, *p), g) for n, (p, g) in paths(inner).items()
                  if only is None or n in only} if inner
                 else {public_name(f): ((f.name,), f)} if "help" in f.metadata else {})
        twice = set(found) & set(out)
        if twice:
            raise TypeError(f"{getattr(cls, '__name__', cls)}: option(s) {sorted(twice)} "
                            "declared twice")
        out.update(found)
    return out


def not_taken(obj: Any) -> set[str]:
    """The public names of ``obj``'s options (its components' included) that its values leave
    unused (declared with ``when=``): they are ignored, and no part of what a run is, so a run
    of another model is what it was before that model's options existed."""
    unused = set()
    for name, (path, f) in paths(obj).items():
        when = f.metadata.get("when")
        if when is not None:
            owner = obj
            for attr in path[:-1]:
                owner = getattr(owner, attr)
            if getattr(owner, when[0]) not in when[1]:
                unused.add(name)
    return unused


def ignored_flags(obj: Any) -> list[str]:
    """The options :func:`not_taken` leaves unused but given a value other than their default,
    as flags with their values (for a warning)."""
    found = declared(obj)
    return [f"{flag(name)} {value_of(obj, name)}" for name in sorted(not_taken(obj))
            if value_of(obj, name) != found[name].default]


def declared(cls: Any) -> dict[str, dataclasses.Field]:
    """The options a dataclass (or an instance) declares, its components' included, by public
    name; fields without help text (a speed model's slow-learner table) are not options."""
    return {name: f for name, (_, f) in paths(cls).items()}


@functools.cache
def _class_paths(cls: type) -> dict[str, tuple[tuple[str, ...], dataclasses.Field]]:
    """:func:`paths` of a class, flattened once (a config's option read by its flat name,
    ``config.batch_size``, would otherwise flatten the whole config each time)."""
    return paths(cls)


def value_of(obj: Any, name: str) -> Any:
    """Option ``name``'s value in ``obj``, wherever its component holds it."""
    path, _ = _class_paths(type(obj))[name]
    for attr in path:
        obj = getattr(obj, attr)
    return obj


def flatten(obj: Any) -> dict[str, Any]:
    """Every option's value in ``obj`` by public name (the flat YAML of a run)."""
    return {name: value_of(obj, name) for name in paths(obj)}


def check_fields(obj: Any) -> None:
    """Refuse any declared option of ``obj`` whose value its declaration does not allow (a
    component checked its own when it was made)."""
    for f in dataclasses.fields(obj):
        if "help" in f.metadata:
            check_value(public_name(f), f, getattr(obj, f.name))


class Options:
    """Base of the options dataclasses: made, they check every declared field."""

    def __post_init__(self) -> None:
        check_fields(self)


def make(cls: type, values: Mapping[str, Any], **others: Any) -> Any:
    """``cls`` made from flat ``values`` by public name, each component from its options
    (missing ones take their defaults), and its fields that are no options from ``others``."""
    made = dict(others)
    for f in dataclasses.fields(cls):
        inner = f.metadata.get("component")
        if inner is not None:
            only = f.metadata.get("only")
            taken = values if only is None else {n: v for n, v in values.items() if n in only}
            made[f.name] = make(inner, taken, **f.metadata.get("fixed", {}))
        elif "help" in f.metadata and public_name(f) in values:
            made[f.name] = values[public_name(f)]
    return cls(**made)


_KINDS = {"tuple[float, ...]": "floats"}


def kind(f: dataclasses.Field) -> str:
    """"int", "float", "str", "bool" or "floats" (a tuple of numbers: a sweep), whether or not
    the annotations are strings; an optional option (``int | None``, None: not given, the
    help says what then) has its values' kind."""
    name = (f.type if isinstance(f.type, str) else f.type.__name__).removesuffix(" | None")
    return _KINDS.get(name, name)


def coerce(name: str, f: dataclasses.Field, value: Any, where: str) -> Any:
    """``value`` (YAML's, or a NAME=VALUE string) as option ``name``'s type, or an error naming
    both."""
    want = kind(f)
    bad = AsrdistError(f"{where}: {name}: {value!r} is not a valid {want}")
    if want == "bool":
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.strip().lower() in ("true", "false"):
            return value.strip().lower() == "true"  # a NAME=VALUE string
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
