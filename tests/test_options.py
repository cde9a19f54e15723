"""One declaration per option: checks in one style, components flattened, types coerced."""

from __future__ import annotations

import math
from dataclasses import dataclass, fields

import pytest

from asrdist.errors import AsrdistError
from asrdist.options import (
    NON_NEGATIVE,
    POSITIVE,
    Options,
    at_least,
    coerce,
    component,
    declared,
    fingerprint,
    flatten,
    in_range,
    make,
    option,
    value_of,
)


@dataclass(frozen=True)
class Part(Options):
    size: int = option(4, "how big", check=POSITIVE)
    kind_: str = option("a", "which kind", ("a", "b"), name="kind")
    rate: float = option(0.5, "a rate", check=in_range(0, 1))
    table: dict = None  # type: ignore[assignment]  (no help: not an option)


@dataclass(frozen=True)
class Other(Options):
    speed: float = option(1.0, "how fast", check=POSITIVE)


@dataclass
class Whole:
    where: str = option("", "where to write", fingerprint=False)
    part: Part = component(Part)
    seed: int = option(0, "a seed")
    other: Other = component(Other)


@pytest.mark.parametrize(("values", "message"), [
    ({"size": 0}, "--size must be positive, got 0"),
    ({"kind_": "c"}, "--kind 'c': choose one of a, b"),
    ({"rate": 1.0}, r"--rate must be in \[0, 1\), got 1.0"),
])
def test_a_bad_value_is_refused_naming_the_flag(values, message):
    with pytest.raises(AsrdistError, match=message):
        Part(**values)


def test_checks_say_what_a_value_must_do():
    assert (POSITIVE.ok(1), POSITIVE.ok(0), NON_NEGATIVE.ok(0), NON_NEGATIVE.ok(-1)) == (
        True, False, True, False)
    assert at_least(1).what == "be at least 1" and at_least(1).ok(math.sqrt(2))
    assert in_range(0, 0.5).what == "be in [0, 0.5)"


def test_options_are_the_fields_with_help_by_public_name():
    assert list(declared(Part)) == ["size", "kind", "rate"]
    assert make(Part, {"kind": "b", "size": 2, "other": 1}) == Part(2, "b")


def test_a_whole_of_components_has_their_options_flat_in_declaration_order():
    assert list(declared(Whole)) == ["where", "size", "kind", "rate", "seed", "speed"]
    assert declared(Whole)["kind"] is declared(Part)["kind"]  # the component's declaration
    whole = make(Whole, {"kind": "b", "speed": 2.0, "seed": 3})
    assert whole == Whole(part=Part(kind_="b"), seed=3, other=Other(2.0))
    assert value_of(whole, "speed") == 2.0
    assert flatten(whole) == {"where": "", "size": 4, "kind": "b", "rate": 0.5, "seed": 3,
                              "speed": 2.0}
    assert make(Whole, flatten(whole)) == whole  # the flat YAML reads back
    with pytest.raises(AsrdistError, match="--speed must be positive"):
        make(Whole, {"speed": 0.0})


def test_fingerprint_false_leaves_an_option_out_of_what_a_run_is():
    assert fingerprint(Part()) == {"size": 4, "kind": "a", "rate": 0.5}
    where = declared(Whole)["where"]
    assert (where.metadata["fingerprint"], where.metadata["resumable"]) == (False, True)


def test_an_option_declared_twice_in_a_whole_is_refused():
    @dataclass
    class Twice:
        part: Part = component(Part)
        size: int = option(1, "again")

    with pytest.raises(TypeError, match=r"option\(s\) \['size'\] declared twice"):
        declared(Twice)


@pytest.mark.parametrize(("value", "out"), [("3", 3), (3, 3), ("-2", -2)])
def test_ints_are_read_from_text_and_numbers(value, out):
    assert coerce("size", fields(Part)[0], value, "x") == out


@pytest.mark.parametrize("value", ["3.5", True, "many"])
def test_what_is_not_an_int_is_named(value):
    with pytest.raises(AsrdistError, match=f"conf.yaml: size: {value!r} is not a valid int"):
        coerce("size", fields(Part)[0], value, "conf.yaml")


def test_floats_are_finite():
    rate = fields(Part)[2]
    assert coerce("rate", rate, "1e-3", "x") == 0.001
    with pytest.raises(AsrdistError, match="'inf' is not a valid float"):
        coerce("rate", rate, "inf", "x")
