"""What the probes quote of a refused command: its only Error: line, the Error: line it ended
with after its log lines (never after a traceback), else the tail of its output."""

from __future__ import annotations

from types import SimpleNamespace

from bench.probes.refusal import error_line, last_error_line, said


def _result(exit_code: int, output: str) -> SimpleNamespace:
    return SimpleNamespace(exit_code=exit_code, output=output)


def test_the_one_error_line_and_the_last_one():
    alone = _result(1, "Error: no file x\n")
    logged = _result(1, "a warning\nError: no file x\n")
    assert error_line(alone) == last_error_line(alone) == "Error: no file x"
    assert error_line(logged) is None and last_error_line(logged) == "Error: no file x"
    assert last_error_line(_result(1, "Traceback (most recent call last):\nError: x")) is None
    assert error_line(_result(2, "Error: usage")) is None  # a usage error is no refusal
    assert last_error_line(_result(0, "")) is None


def test_what_else_it_said_is_its_status_and_its_output_s_tail():
    assert said(_result(0, "ran\n")) == "exit 0: 'ran'"
    assert said(_result(1, "x" * 200 + "END")) == f"exit 1: {'x' * 157 + 'END'!r}"
