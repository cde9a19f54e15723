"""Run every issue-41 scenario for real and print one row each: ``python -m bench.probes``.

Each module of this package (files, network, audio, errors) exposes ``PROBES``: functions that
take an empty scratch directory, act out one scenario (a crafted file, a hostile peer, a bad
input) and return ``(ok, detail)``. The exit status is 1 when any row is not ok, so the table can
guard a release.
"""

from __future__ import annotations

import argparse
import importlib
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from pathlib import Path

MODULES = ("files", "network", "audio", "errors")
Probe = Callable[[Path], tuple[bool, str]]


def _row_name(probe: Probe) -> str:
    doc = (probe.__doc__ or probe.__name__).strip()
    return doc.splitlines()[0]


def _run_one(probe: Probe) -> tuple[bool, str, float]:
    """One probe in its own scratch dir; a probe that raises is a failed row, not a crash."""
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="asrdist-probe-") as scratch:
        try:
            ok, detail = probe(Path(scratch))
        except Exception as exc:  # noqa: BLE001 - the table reports it
            last = traceback.format_exception_only(type(exc), exc)[-1].strip()
            ok, detail = False, f"probe raised {last}"
    return ok, detail, time.monotonic() - start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.probes", description=__doc__)
    parser.add_argument("modules", nargs="*", metavar="GROUP",
                        help=f"which groups of scenarios, of {', '.join(MODULES)} (default: all)")
    args = parser.parse_args(argv)
    unknown = sorted(set(args.modules) - set(MODULES))
    if unknown:
        parser.error(f"no group {', '.join(unknown)}: choose from {', '.join(MODULES)}")
    args.modules = args.modules or list(MODULES)
    failed = 0
    print(f"| {'group':8} | {'scenario':60} | ok | s | detail |")
    print(f"|{'-' * 10}|{'-' * 62}|----|---|--------|")
    for name in args.modules:
        probes: list[Probe] = importlib.import_module(f"bench.probes.{name}").PROBES
        for probe in probes:
            ok, detail, seconds = _run_one(probe)
            failed += not ok
            print(f"| {name:8} | {_row_name(probe):60} | {'ok' if ok else 'NO'} "
                  f"| {seconds:.0f} | {detail} |", flush=True)
    print(f"{failed} row(s) not ok" if failed else "every row ok")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
