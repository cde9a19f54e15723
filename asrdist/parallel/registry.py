"""``--algo`` name -> strategy, its options dataclass and a one-line summary.

Everything outside the strategies is derived from here: asrdist-train's ``--algo`` choices and
strategy flags, the YAML keys of TrainConfig, and the README's ``--algo`` table
(:func:`algo_table`). A strategy module ends with one :func:`register` call; the built-in
modules are listed in ``BUILTIN``, and any other importable module named in the environment
variable ``ASRDIST_STRATEGIES`` (comma-separated) is imported too, so a strategy of one's own
needs no edit here, in the trainer, the config or the CLI (the variable reaches every learner
under mpiexec, srun and torchrun).
"""

from __future__ import annotations

import dataclasses
import importlib
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from asrdist.options import flag
from asrdist.parallel.options import CompressOptions, NoOptions, ProcessOptions
from asrdist.parallel.processes.transport import with_transport
from asrdist.parallel.strategy import Learner, Single, Strategy

BUILTIN = tuple(f"asrdist.parallel.strategies.{name}" for name in (
    "ssgd", "adpsgd", "hadpsgd", "ma", "outer", "streaming", "async_diloco"))
PLUGINS_ENV = "ASRDIST_STRATEGIES"
# --compress and its options: every multi-learner strategy's, "the common ones" of the table
COMPRESS_FIELDS = frozenset(f.name for f in dataclasses.fields(CompressOptions))


@dataclass(frozen=True)
class StrategySpec:
    """One ``--algo``: ``make(learner, options)`` builds it from an ``options`` instance."""

    name: str
    make: Callable[[Learner, Any], Strategy]
    options: type = NoOptions
    summary: str = ""
    multi_learner: bool = True  # False: refuses a world of more than one learner
    elastic: bool = False  # True: can go on without a lost learner (--elastic)

    def process_options(self) -> tuple[str, ...]:
        """The process options (:class:`ProcessOptions`) a run of it takes: those of every
        multi-learner strategy, and --elastic where it can lose a learner."""
        if not self.multi_learner:
            return ()
        return tuple(f.name for f in dataclasses.fields(ProcessOptions)
                     if f.name != "elastic" or self.elastic)


def _option_fields(entries: Any) -> dict[str, dataclasses.Field]:
    out: dict[str, dataclasses.Field] = {}
    for s in entries:
        for f in dataclasses.fields(s.options):
            out.setdefault(f.name, f)
    return out


_SPECS: dict[str, StrategySpec] = {}
_loaded: set[str] = set()


def register(spec: StrategySpec) -> None:
    """Add ``spec``; an option declared by several strategies must agree in type and default."""
    if not dataclasses.is_dataclass(spec.options):
        raise TypeError(f"{spec.name}: options must be a dataclass, not {spec.options!r}")
    known = _option_fields(_SPECS.values())
    for f in dataclasses.fields(spec.options):
        other = known.get(f.name)
        if other is not None and (other.type, other.default) != (f.type, f.default):
            raise ValueError(f"{spec.name}: option {f.name} differs from another strategy's")
    _SPECS[spec.name] = spec


register(StrategySpec("single", lambda learner, options: Single(),
                      summary="one learner, plain SGD (the default)", multi_learner=False))


def _load() -> None:
    """Import the built-in strategy modules and those of ``ASRDIST_STRATEGIES``, once each."""
    plugins = [m.strip() for m in os.environ.get(PLUGINS_ENV, "").split(",") if m.strip()]
    for module in (*BUILTIN, *plugins):
        if module not in _loaded:
            _loaded.add(module)
            importlib.import_module(module)


def specs() -> dict[str, StrategySpec]:
    """Every registered strategy, by name: ``single``, the built-in modules in
    :data:`BUILTIN` order, then plugins (registration order alone would follow whichever
    module some caller imported first)."""
    _load()
    return dict(sorted(_SPECS.items(), key=_table_position))


def algo_names() -> list[str]:
    """The names ``--algo`` accepts."""
    return sorted(specs())


def spec(name: str) -> StrategySpec:
    try:
        return specs()[name]
    except KeyError:
        choices = ", ".join(algo_names())
        raise ValueError(f"unknown --algo {name!r}; choose one of {choices}") from None


def option_fields() -> dict[str, dataclasses.Field]:
    """Every process option, then every strategy option (the union over strategies), by name,
    in registration order."""
    return {**{f.name: f for f in dataclasses.fields(ProcessOptions)},
            **_option_fields(specs().values())}


def options_of(name: str) -> tuple[str, ...]:
    """The option names a run of strategy ``name`` takes: its process options, then its own."""
    chosen = spec(name)
    return chosen.process_options() + tuple(f.name for f in dataclasses.fields(chosen.options))


def algorithm_options(name: str) -> tuple[str, ...]:
    """The options strategy ``name``'s own dataclass declares (its algorithm's)."""
    return tuple(f.name for f in dataclasses.fields(spec(name).options))


def make_options(name: str, values: Mapping[str, Any]) -> Any:
    """Strategy ``name``'s own options from ``values`` (missing ones take their defaults; an
    option it does not take is an error, so a misspelt option is never ignored)."""
    accepted = algorithm_options(name)
    unknown = sorted(set(values) - set(accepted))
    if unknown:
        takes = ", ".join(accepted) if accepted else "no options"
        raise ValueError(f"unknown option(s) {', '.join(unknown)}; {name} takes {takes}")
    return spec(name).options(**values)


def make_process_options(name: str, values: Mapping[str, Any]) -> ProcessOptions:
    """The process options of a run of ``name`` from ``values`` (those it does not take, such
    as --elastic for a fail-stop strategy, are an error)."""
    taken = spec(name).process_options()
    unknown = sorted(set(values) - set(taken))
    if unknown:
        raise ValueError(f"unknown option(s) {', '.join(unknown)}; a run of {name} takes "
                         f"{', '.join(taken) or 'no process options'}")
    return ProcessOptions(**values)


def make_strategy(name: str, learner: Learner | None = None, **options: Any) -> Strategy:
    """Build strategy ``name`` for ``learner`` (default: :meth:`Learner.current`); its process
    options (``exchange_timeout=``, ...) go to the transport made for it when the learner has
    none. None option values are left to the defaults."""
    given = {k: v for k, v in options.items() if v is not None}
    process = set(spec(name).process_options())
    own = make_options(name, {k: v for k, v in given.items() if k not in process})
    transport = make_process_options(name, {k: v for k, v in given.items() if k in process})
    return spec(name).make(with_transport(learner or Learner.current(), transport), own)


def _table_position(item: tuple[str, StrategySpec]) -> int:
    """:func:`specs`' order: its module's place (a stable sort keeps registration order
    within one)."""
    module = item[1].make.__module__
    if module in BUILTIN:
        return 1 + BUILTIN.index(module)
    return 0 if module == __name__ else 1 + len(BUILTIN)


def algo_table(names: list[str] | None = None) -> str:
    """The README's ``--algo`` table (markdown) of ``names`` (default: all), from the registry;
    "the common ones" are :class:`ProcessOptions` (timeout, slow learner, distance sampling)
    and the compression options (:class:`CompressOptions`)."""
    rows = ["| `--algo` | strategy | options |", "|---|---|---|"]
    for name, s in specs().items():
        if names is not None and name not in names:
            continue
        own = ["`--elastic`"] if s.elastic else []
        own += [f"`{flag(f.name)}`" for f in dataclasses.fields(s.options)
                if f.name != "seed" and not f.metadata.get("training")
                and f.name not in COMPRESS_FIELDS]
        if s.multi_learner:
            own.append("the common ones")
        opts = ", ".join(own) or "none"
        rows.append(f"| `{name}` | {s.summary} | {opts} |")
    return "\n".join(rows)
