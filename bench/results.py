"""Publishing a benchmark's markdown section into bench/RESULTS.md."""

from __future__ import annotations

import re
from pathlib import Path

from asrdist.fsutil import atomic_write


def write_section(path: str | Path, text: str) -> None:
    """Replace the section of ``path`` headed by ``text``'s first line (up to the next '## '),
    or append it; so re-running a benchmark updates its figures instead of repeating them."""
    path = Path(path)
    heading = text.splitlines()[0]
    old = path.read_text() if path.exists() else ""
    pattern = re.compile(re.escape(heading) + r"\n.*?(?=^## |\Z)", re.S | re.M)
    if pattern.search(old):  # a blank line before the next section's heading, as in markdown
        new = pattern.sub(lambda _: text.rstrip("\n") + "\n\n", old).rstrip("\n") + "\n"
    else:
        new = old.rstrip("\n") + "\n\n" + text if old else text
    with atomic_write(path) as f:
        f.write(new)


def publish(lines: list[str], path: str | Path | None) -> None:
    """Print the section made of ``lines`` and, when ``path`` is given, write it there."""
    text = "\n".join(lines) + "\n"
    print(text)
    if path:
        write_section(path, text)


REPO = Path(__file__).resolve().parents[1]


def shown(path: str | Path, placeholder: str) -> str:
    """How ``path`` is written into RESULTS.md: relative to the repository when it lies inside
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
