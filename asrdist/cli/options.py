"""Click options derived from declared options (asrdist.options): a flag per option, with the
declaration's help text and default, for every command that offers it.

A derived flag not given is None, so the caller can tell "not given" from "given the default"
(asrdist-train's config file then applies); :func:`given_or_default` fills in the declared
default. A command makes its derived flags when it runs (:class:`DerivedCommand`), so a
strategy registered later (ASRDIST_STRATEGIES) brings its flags along.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

import click

from asrdist.cli import AsrdistCommand, number_list
from asrdist.options import declared, flag, kind, make


class Numbers(click.ParamType):
    """A "floats" option's value: numbers separated by spaces or commas ('': none)."""

    name = "numbers"

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> tuple[float, ...]:
        if isinstance(value, tuple):
            return value
        return number_list(value, param.opts[0] if param is not None else "")


_PY_TYPES = {"int": int, "float": float, "str": str, "floats": Numbers()}


def help_text(f: dataclasses.Field) -> str:
    """What ``--help`` says of a declared option: its help and its default (an optional
    option's help says what not giving it does)."""
    if f.default is None:
        return f.metadata["help"]
    shown = " ".join(map(str, f.default)) if isinstance(f.default, tuple) else f.default
    return f"{f.metadata['help']} [default: {shown if shown != '' else 'none'}]"


def click_option(name: str, f: dataclasses.Field,
                 param_type: click.ParamType | None = None) -> click.Option:
    """The flag of declared option ``name`` (``--no-NAME`` too for a bool); ``param_type``
    replaces the type derived from the declaration."""
    text = help_text(f)
    if kind(f) == "bool":
        return click.Option([f"{flag(name)}/--no-{flag(name)[2:]}", name], default=None,
                            help=text)
    if param_type is None:
        choices = f.metadata.get("choices")
        param_type = (click.Choice(choices) if choices
                      else click.types.convert_type(_PY_TYPES[kind(f)]))
    return click.Option([flag(name), name], type=param_type, default=None, help=text)


def flags_of(*classes: type) -> list[click.Option]:
    """A flag per option that ``classes`` declare, in declaration order."""
    return [click_option(name, f) for cls in classes for name, f in declared(cls).items()]


def given_or_default(fields: Mapping[str, dataclasses.Field],
                     values: Mapping[str, Any]) -> dict[str, Any]:
    """Each option of ``fields`` as given (``values``), or its declared default."""
    return {n: f.default if values.get(n) is None else values[n] for n, f in fields.items()}


def made(cls: type, values: Mapping[str, Any], **others: Any) -> Any:
    """``cls`` from its derived flags' values (a command's, all of them), each option not given
    at its declared default, and its fields that are no options from ``others``."""
    return make(cls, given_or_default(declared(cls), values), **others)


class AlgoChoice(click.Choice):
    """``--algo``'s choices are the registry's names when the command runs, not at import."""

    def __init__(self) -> None:
        super().__init__([])

    @property
    def choices(self) -> list[str]:  # type: ignore[override]
        # here, not at import: the registry brings torch, which decode, lmrescore and the other
        # commands made from declarations need not load (a second at each of a recipe's starts)
        from asrdist.parallel import registry

        return registry.algo_names()

    @choices.setter
    def choices(self, _: Any) -> None:
        pass


class DerivedCommand(AsrdistCommand):
    """A command whose derived flags are made when it runs, by ``make_options`` (once per
    invocation: click asks for the parameters several times), after its own."""

    make_options: Callable[[], list[click.Option]] = staticmethod(list)

    def get_params(self, ctx: click.Context) -> list[click.Parameter]:
        if "asrdist.options" not in ctx.meta:
            ctx.meta["asrdist.options"] = self.make_options()
        made = ctx.meta["asrdist.options"]
        return [*self.params, *made, *super().get_params(ctx)[len(self.params):]]


def derived_command(make_options: Callable[[], list[click.Option]]) -> type[DerivedCommand]:
    """A :class:`DerivedCommand` class whose flags ``make_options`` makes."""
    return type("Derived", (DerivedCommand,), {"make_options": staticmethod(make_options)})
