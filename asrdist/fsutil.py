"""Atomic file output and stage-completion markers, so nothing half-written looks complete;
outputs never follow a symbolic link planted where they go.

An output is written as a temp file renamed over its name (:func:`atomic_write`,
:func:`atomic_path`: the rename replaces a link, never writes through it), or, when it must
stay one file (a lock, a log appended to), opened with ``O_NOFOLLOW`` (:func:`open_output`,
:func:`open_fd`): a link there is refused in one line naming it.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO

from asrdist.errors import AsrdistError

# mkstemp/mkdtemp create private (0600/0700) entries; outputs get the usual umask-derived modes
# so that other users (a Slurm job running as someone else) can read them.
_UMASK = os.umask(0)
os.umask(_UMASK)


def _publish_mode(path: str | os.PathLike, directory: bool = False) -> None:
    os.chmod(path, (0o777 if directory else 0o666) & ~_UMASK)


def open_fd(path: str | os.PathLike, flags: int, mode: int = 0o666) -> int:
    """``os.open`` that never follows a symbolic link at ``path``: one there (planted to
    redirect an output, say) is refused in one line naming it and where it points."""
    try:
        return os.open(path, flags | os.O_NOFOLLOW, mode)
    except OSError as e:
        if e.errno != errno.ELOOP or not os.path.islink(path):
            raise
        raise AsrdistError(f"{path}: refused: a symbolic link (to {os.readlink(path)}) where "
                           "asrdist writes a file of its own; remove it") from e


def open_output(path: str | os.PathLike, mode: str = "w", **kwargs: object) -> IO:
    """``open(path, mode)`` for writing in place, refusing a symbolic link at ``path`` (see
    :func:`open_fd`); the file object's ``name`` is ``path``."""
    return open(path, mode, opener=open_fd, **kwargs)  # type: ignore[call-overload]


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temp path for a writer that needs a filename; rename it to ``path`` on success."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    _publish_mode(tmp)
    try:
        yield Path(tmp)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def copy_file(src: str | os.PathLike, dest: str | os.PathLike) -> Path:
    """Copy ``src``'s bytes to ``dest`` atomically: a link at ``dest`` is replaced, its target
    untouched (``shutil.copyfile`` would write through it). Fits ``copytree``'s
    ``copy_function``."""
    with atomic_path(dest) as tmp:
        shutil.copyfile(src, tmp)
    return Path(dest)


@contextlib.contextmanager
def atomic_write(path: str | os.PathLike, mode: str = "w") -> Iterator[IO]:
    """Write to a temporary file beside ``path`` and rename it into place on success.

    On an exception the temporary file is removed and ``path`` keeps its old content.
    """
    with atomic_path(path) as tmp, open(tmp, mode) as f:
        yield f
        f.flush()
        os.fsync(f.fileno())


def write_atomically(path: str | os.PathLike, write: Callable[[IO[bytes]], object],
                     what: str) -> None:
    """Write ``path`` in binary through ``write`` (``torch.save``, say) atomically and durably; a
    write error (a full disk) is one line naming the file and ``what`` it was to hold."""
    try:
        with atomic_write(path, "wb") as f:
            write(f)
    except OSError as e:
        raise AsrdistError(f"{path}: cannot write the {what}: {e.strerror or e}") from e
    except RuntimeError as e:  # torch.save's zip writer, failing after the OSError it met
        if not isinstance(e.__context__, OSError):
            raise
        cause = e.__context__
        raise AsrdistError(f"{path}: cannot write the {what}: {cause.strerror or cause}") from e


@contextlib.contextmanager
def naming_full_disk(path: str | os.PathLike, what: str = "") -> Iterator[None]:
    """A full disk or quota met in the block is one line naming ``path`` (and ``what`` it was
    to hold): a write's OSError names no file."""
    try:
        yield
    except OSError as e:
        if e.errno not in (errno.ENOSPC, errno.EDQUOT):
            raise
        held = f" {what}" if what else ""
        raise AsrdistError(f"{path}: cannot write{held}: {e.strerror}") from e


@contextlib.contextmanager
def staged_dir(final: str | os.PathLike) -> Iterator[Path]:
    """Yield an empty temporary directory beside ``final``; on success it replaces ``final``.

    A killed writer leaves only a hidden ``.name.*.tmp`` directory, never a partial ``final``.
    """
    final = Path(final)
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=final.parent, prefix=f".{final.name}.", suffix=".tmp"))
    _publish_mode(tmp, directory=True)
    try:
        yield tmp
        if final.exists():
            shutil.rmtree(final)
        os.replace(tmp, final)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def done_marker(directory: str | os.PathLike, stage: str) -> Path:
    """The file whose presence says ``stage`` completed in ``directory``."""
    return Path(directory) / f".{stage}.done"


def mark_done(directory: str | os.PathLike, stage: str) -> None:
    """Record that ``stage`` finished writing ``directory`` (written last, atomically)."""
    with atomic_write(done_marker(directory, stage)) as f:
        f.write("done\n")


def is_done(directory: str | os.PathLike, stage: str) -> bool:
    """True when ``stage`` completed in ``directory``; a killed stage leaves no marker."""
    return done_marker(directory, stage).is_file()


def clear_done(directory: str | os.PathLike, stage: str) -> None:
    """Forget that ``stage`` completed, before rewriting its outputs."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(done_marker(directory, stage))
