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
