"""Atomic file output and stage-completion markers, so nothing half-written looks complete."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO


@contextlib.contextmanager
def atomic_write(path: str | os.PathLike, mode: str = "w") -> Iterator[IO]:
    """Write to a temporary file beside ``path`` and rename it into place on success.

    On an exception the temporary file is removed and ``path`` keeps its old content.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, mode) as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temp path for a writer that needs a filename; rename it to ``path`` on success."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    try:
        yield Path(tmp)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def mark_done(directory: str | os.PathLike, stage: str) -> None:
    """Record that ``stage`` finished writing ``directory`` (written last, atomically)."""
    with atomic_write(Path(directory) / f".{stage}.done") as f:
        f.write("done\n")


def is_done(directory: str | os.PathLike, stage: str) -> bool:
    """True when ``stage`` completed in ``directory``; a killed stage leaves no marker."""
    return (Path(directory) / f".{stage}.done").is_file()


def clear_done(directory: str | os.PathLike, stage: str) -> None:
    """Forget that ``stage`` completed, before rewriting its outputs."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(Path(directory) / f".{stage}.done")
