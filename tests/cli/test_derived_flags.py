"""asrdist-decode, asrdist-compute-loglikes, asrdist-lmrescore and asrdist-prepare-swbd derive
their option flags from the library's declarations (decode's search, sweep and chunking; the
swbd preparation's), as asrdist-train does: each flag's name, default and help come from the
declaration, and a bad value is one line naming the flag."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click
import pytest
from click.testing import CliRunner

from asrdist.cli import compute_loglikes, decode, lmrescore, prepare_swbd
from asrdist.cli.options import help_text
from asrdist.corpus.swbd_prepare import SwbdOptions
from asrdist.decode.acoustic import AS_TRAINED, Chunking
from asrdist.decode.decode_dir import S5C_LMWTS, S5C_WIPS, Sweep
from asrdist.decode.lattice import LatticeOptions
from asrdist.options import declared, flag
from asrdist.stage import Skipped

COMMANDS = [(decode.main, (LatticeOptions, Sweep, Chunking)),
            (compute_loglikes.main, (Chunking,)),
            (lmrescore.main, (Sweep,)),
            (prepare_swbd.main, (SwbdOptions,))]
RELEASES = ["--swbd-audio", "a", "--ms98", "b", "--eval2000-audio", "c", "--eval2000-ref", "d"]


def _options(command: click.Command) -> dict[str, click.Option]:
    """The command's options as ``--help`` lists them, by parameter name."""
    ctx = click.Context(command, info_name="x")
    return {p.name: p for p in command.get_params(ctx) if isinstance(p, click.Option)}


@pytest.mark.parametrize("command, classes", COMMANDS)
def test_every_declared_option_is_a_derived_flag_with_its_help_and_default(command, classes):
    options = _options(command)
    written = {p.name for p in command.params}  # the command's own flags: paths, --nj, --cmd
    for cls in classes:
        for name, f in declared(cls).items():
            assert name not in written, name
            assert options[name].opts[0] == flag(name)
            assert options[name].help == help_text(f)
            assert f.metadata["help"] in options[name].help
            if f.default not in (None, ()):
                assert options[name].help.endswith("[default: " + (
                    " ".join(map(str, f.default)) if isinstance(f.default, tuple)
                    else str(f.default)) + "]")


@pytest.mark.parametrize("command, classes", COMMANDS)
def test_a_changed_declaration_changes_the_flag(monkeypatch, command, classes):
    """The flags are made from the declarations, not written beside them."""
    name, f = next(iter(declared(classes[0]).items()))
    monkeypatch.setattr(f, "default", 7)
    monkeypatch.setattr(f, "metadata", {**f.metadata, "help": "Changed."})
    assert _options(command)[name].help == "Changed. [default: 7]"


def test_decode_keeps_decode_sh_and_score_sclite_sh_defaults():
    assert LatticeOptions() == LatticeOptions(acwt=0.1, beam=15.0, lattice_beam=8.0)
    assert (Sweep().lmwts, Sweep().wips) == (S5C_LMWTS, S5C_WIPS)
    assert Chunking() == AS_TRAINED


@pytest.fixture
def calls(monkeypatch) -> list[dict[str, Any]]:
    """What each command hands the library, instead of running it."""
    made: list[dict[str, Any]] = []

    def record(*args: Any, **kwargs: Any) -> Skipped:
        made.append({"args": args, **kwargs})
        return Skipped(Path("out"), "stage")

    for module, name in ((decode, "decode_data_dir"), (compute_loglikes, "compute_loglikes"),
                         (prepare_swbd, "prepare_swbd")):
        monkeypatch.setattr(module, name, record)
    return made


def test_flags_not_given_are_the_declared_defaults(calls):
    assert CliRunner().invoke(decode.main, ["--graph", "g", "--data", "d", "--gmm", "m",
                                            "--out", "o"]).exit_code == 0
    assert CliRunner().invoke(compute_loglikes.main, ["--model", "m", "--data", "d",
                                                      "--out", "o"]).exit_code == 0
    assert CliRunner().invoke(prepare_swbd.main, [*RELEASES, "--out", "o"]).exit_code == 0
    dec, loglikes, prep = calls
    assert (dec["opts"], dec["lmwts"], dec["wips"], dec["chunking"]) == (
        LatticeOptions(), S5C_LMWTS, S5C_WIPS, Chunking())
    assert loglikes["args"][3] == Chunking()
    assert prep["args"][1] == SwbdOptions("a", "b", "c", "d")


def test_given_flags_reach_the_library(calls):
    result = CliRunner().invoke(decode.main, [
        "--graph", "g", "--data", "d", "--model", "m", "--out", "o", "--acwt", "0.2",
        "--beam", "10", "--lattice-beam", "4", "--lmwt", "7,9", "--wip", "",
        "--frames-per-chunk", "0", "--extra-left-context", "3"])
    assert result.exit_code == 0, result.output
    result = CliRunner().invoke(prepare_swbd.main, [
        *RELEASES, "--out", "o", "--dev-utts", "4", "--max-dup", "2", "--speed-perturb",
        "0.9 1.1", "--no-always-include-prefix", "--allow-partial"])
    assert result.exit_code == 0, result.output
    dec, prep = calls
    assert (dec["opts"], dec["lmwts"], dec["wips"], dec["chunking"]) == (
        LatticeOptions(0.2, 10.0, 4.0), (7.0, 9.0), (0.0,), Chunking(0, 3, None))
    assert prep["args"][1] == SwbdOptions("a", "b", "c", "d", dev_utts=4, max_dup=2,
                                          speed_factors=(0.9, 1.1), always_include_prefix=False,
                                          allow_partial=True)


@pytest.mark.parametrize("command, args, code, message", [
    (decode.main, ["--acwt", "0"], 1, "--acwt must be positive, got 0.0"),
    (decode.main, ["--frames-per-chunk", "-1"], 1,
     "--frames-per-chunk must not be negative, got -1"),
    (decode.main, ["--lmwt", "7 x"], 2, "Invalid value for --lmwt: '7 x': give numbers"),
    (decode.main, ["--lmwt", "0 7"], 1, "--lmwt must be positive numbers, got (0.0, 7.0)"),
    (compute_loglikes.main, ["--extra-right-context", "-2"], 1,
     "--extra-right-context must not be negative, got -2"),
    (prepare_swbd.main, ["--dev-utts", "0"], 1, "--dev-utts must be at least 1, got 0"),
    (prepare_swbd.main, ["--max-dup", "1"], 1, "--max-dup must be at least 2, got 1"),
    (prepare_swbd.main, ["--speed-perturb", "0 1"], 1,
     "--speed-perturb must be positive numbers, got (0.0, 1.0)"),
    (prepare_swbd.main, ["--speed-perturb", "0.9 x"], 2,
     "Invalid value for --speed-perturb: '0.9 x': give numbers"),
])
def test_a_bad_value_is_one_line_naming_its_flag(calls, command, args, code, message):
    given = {decode.main: ["--graph", "g", "--data", "d", "--model", "m", "--out", "o"],
             compute_loglikes.main: ["--model", "m", "--data", "d", "--out", "o"],
             prepare_swbd.main: [*RELEASES, "--out", "o"]}[command]
    result = CliRunner().invoke(command, [*given, *args])
    assert (result.exit_code, result.output.strip().splitlines()[-1]) == (code, f"Error: {message}")
    assert calls == []


@pytest.mark.parametrize("args, message", [
    (["--acwt", "0"], "--acwt must be positive, got 0.0"),
    (["--lmwt", "0"], "--lmwt must be positive numbers, got (0.0,)"),
])
def test_lmrescore_refuses_a_bad_value_before_rescoring(monkeypatch, args, message):
    rescored: list[Any] = []
    monkeypatch.setattr(lmrescore, "rescore_decode_dir", lambda *a: rescored.append(a))
    result = CliRunner().invoke(lmrescore.main, [*args, "lang", "lm", "d", "in", "o"])
    assert (result.exit_code, result.output.strip().splitlines()[-1]) == (1, f"Error: {message}")
    assert rescored == []
