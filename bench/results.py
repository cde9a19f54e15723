"""Where a benchmark's figures go.

Each script owns one generated file, ``bench/results/<script>.md`` (its PNG and JSON beside
it, ``bench/results/<script>.png``), and rewrites it whole on each run; the hand-written
reading of those figures lives in ``bench/readings/<script>.md``, which no script writes.
``bench/RESULTS.md``, the page of findings, is written by hand and links to both::

    publish_option(ap, __file__)          # --publish [FILE]: bench/results/<script>.md
    publish(lines, args.publish)          # print the section; write it there when asked
"""

from __future__ import annotations

import argparse
from pathlib import Path

from asrdist.errors import AsrdistError
from asrdist.fsutil import atomic_write

REPO = Path(__file__).resolve().parents[1]
GENERATED = REPO / "bench" / "results"
READINGS = REPO / "bench" / "readings"
FINDINGS = REPO / "bench" / "RESULTS.md"


def script_name(script: str | Path) -> str:
    """The name a script's files go by: its module's stem (``bench/studies/network.py``:
    ``network``)."""
    return Path(script).stem


def generated(script: str | Path, suffix: str = ".md") -> Path:
    """The script's generated file (``suffix`` ``.png`` or ``.json``: its figure or data)."""
    return GENERATED / f"{script_name(script)}{suffix}"


def reading(script: str | Path) -> Path:
    """The hand-written reading of the script's figures."""
    return READINGS / f"{script_name(script)}.md"


def publish_option(ap: argparse.ArgumentParser, script: str | Path) -> None:
    """Add ``--publish [FILE]`` to ``ap``: where the generated section is written (alone:
    ``bench/results/<script>.md``; not given: only printed)."""
    ap.add_argument("--publish", nargs="?", const=generated(script), default=None, type=Path,
                    metavar="FILE", help="write the generated section to FILE, replacing it "
                    f"(alone: bench/results/{script_name(script)}.md; the reading beside it "
                    "in bench/readings/ is never written)")


def write_generated(path: str | Path, text: str) -> None:
    """Replace ``path`` by ``text``, atomically; never the page of findings or a reading."""
    path = Path(path).resolve()
    if path == FINDINGS or path.parent == READINGS:
        raise AsrdistError(f"{shown(path, str(path))} is written by hand; a script writes "
                           "its own bench/results/<script>.md (--publish alone)")
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_write(path) as f:
        f.write(text)


def publish(lines: list[str], path: str | Path | None) -> None:
    """Print the section made of ``lines`` and, when ``path`` is given, make it that file."""
    text = "\n".join(lines).rstrip("\n") + "\n"
    print(text)
    if path:
        write_generated(path, text)


def shown(path: str | Path, placeholder: str) -> str:
    """How ``path`` is written into a section: relative to the repository when it lies inside
    it, else ``placeholder`` (a scratch directory of one machine means nothing on another)."""
    try:
        return str(Path(path).resolve().relative_to(REPO))
    except ValueError:
        return placeholder


def scrub(lines: list[str], paths: dict[str | Path, str]) -> list[str]:
    """``lines`` with every path of ``paths`` (path -> placeholder) written as :func:`shown`
    writes it (longest first, so a path inside another is replaced whole; paths without a
    '/' are left alone), then the repository's own absolute prefix dropped."""
    pairs = sorted(((str(p), shown(p, name)) for p, name in paths.items() if "/" in str(p)),
                   key=lambda pair: -len(pair[0]))  # a bare name could be any word of the text
    out = []
    for line in lines:
        for path, text in pairs:
            line = line.replace(path, text)
        out.append(line.replace(f"{REPO}/", ""))
    return out
