"""What a refused command printed, as the probes' rows quote it: its one ``Error:`` line, or
the tail of whatever else it said."""

from __future__ import annotations

from click.testing import Result


def error_line(result: Result) -> str | None:
    """The one ``Error:`` line a refused command printed, or None (it ran, or said more)."""
    lines = result.output.strip().splitlines()
    one = result.exit_code == 1 and len(lines) == 1 and lines[0].startswith("Error: ")
    return lines[0] if one else None


def last_error_line(result: Result) -> str | None:
    """The ``Error:`` line a refused command ended with (exit 1, no traceback), or None: for
    commands that log before they refuse."""
    lines = result.output.strip().splitlines()
    refused = result.exit_code == 1 and bool(lines) and lines[-1].startswith("Error: ")
    return lines[-1] if refused and "Traceback" not in result.output else None


def said(result: Result) -> str:
    """The exit status and the output's last 160 characters."""
    return f"exit {result.exit_code}: {result.output.strip()[-160:]!r}"
