"""When is a stage done? One rule for every CLI that writes an output dir and skips done work.

A stage's output dir is done when its marker (``OUT/.<stage>.done``, written atomically and
last) holds the same fingerprint as this run would have:

- the options that change the output (a JSON-able mapping; options that do not, such as
  ``--nj`` or progress flags, are left out by the caller), and
- the inputs: for each file the caller names, or each file under a directory it names (hidden
  entries, i.e. temp files and markers, skipped), by its resolved path (a symlink, a trailing
  ``/`` or a relative spelling name the same file), its size and mtime; small files are
  compared by a hash of their content instead of their mtime, so rewriting a table with the
  same content changes nothing. A large file (an ark) is compared by mtime, unless the marker
  holds its hash (:func:`record_done` with ``hash_inputs``, as training's does): then one
  whose mtime changed is hashed again, so a ``touch`` or a copy without ``-t`` is no change.

A done stage logs ``<out>: <stage> already done with these options and inputs; skipping
(remove <marker> to redo)`` and its function returns :class:`Skipped`. One done before with
other options or inputs logs what changed and is redone, its marker cleared first; a killed
stage leaves no marker, so its output never looks complete.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from asrdist.fsutil import atomic_write, clear_done, done_marker, naming_full_disk

log = logging.getLogger(__name__)

HASHED_BELOW = 1 << 20  # files up to this size are compared by content, larger ones by mtime
_FORMAT = 1  # version of the marker's JSON
_SHOWN = 4  # changes named in the redo line


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(1 << 22):
            digest.update(block)
    return digest.hexdigest()


def _file_entry(path: Path, hash_large: bool = False) -> dict[str, Any] | None:
    try:
        st = path.stat()
        entry: dict[str, Any] = {"size": st.st_size, "mtime_ns": st.st_mtime_ns}
        if st.st_size <= HASHED_BELOW or hash_large:
            entry["sha256"] = _sha256(path)
    except FileNotFoundError:
        return None
    return entry


def resolved(path: str | os.PathLike) -> str:
    """``path`` absolute, with symlinks, ``.``/``..`` and trailing slashes resolved: how
    inputs are named in a fingerprint, so every spelling of one file is the same input."""
    return os.path.realpath(path)


def describe_files(paths: Iterable[str | os.PathLike],
                   hash_large: bool = False) -> dict[str, dict[str, Any] | None]:
    """Resolved path -> size, mtime (and a content hash when small, or any size with
    ``hash_large``) of each file; a directory is walked (hidden entries skipped), a missing
    path maps to None, an empty one is left out (an unset option must not make the working
    directory an input)."""
    found: dict[str, dict[str, Any] | None] = {}
    for given in paths:
        if not os.fspath(given):
            continue
        path = Path(resolved(given))
        if not path.is_dir():
            found[str(path)] = _file_entry(path, hash_large)
            continue
        for root, dirs, files in os.walk(path):
            dirs[:] = sorted(d for d in dirs if not d.startswith("."))
            for name in sorted(files):
                if not name.startswith("."):
                    found[os.path.join(root, name)] = _file_entry(Path(root) / name, hash_large)
    return found


def fingerprint(
    options: Mapping[str, Any], inputs: Iterable[str | os.PathLike] = ()
) -> dict[str, Any]:
    """The options (as JSON sees them: tuples become lists) and the inputs of one run."""
    return {
        "options": json.loads(json.dumps(dict(options), sort_keys=True, default=str)),
        "inputs": describe_files(inputs),
    }


def read_marker(out: str | os.PathLike, stage: str) -> dict[str, Any] | None:
    """The record in ``stage``'s marker; None without a marker, {} for one without a record."""
    try:
        text = done_marker(out, stage).read_text()
    except FileNotFoundError:
        return None
    try:
        record = json.loads(text)
    except ValueError:
        return {}
    return record if isinstance(record, dict) else {}


def same_file(old: dict | None, new: dict | None, path: str | None = None) -> bool:
    """Whether two :func:`describe_files` entries describe the same content: by hash where
    both have one; else by mtime, and where that changed but ``old`` holds a hash, by
    hashing ``path`` (the file ``new`` describes) now."""
    if old is None or new is None:
        return old is new
    if old.get("size") != new.get("size"):
        return False
    if "sha256" in old and "sha256" in new:
        return old["sha256"] == new["sha256"]
    if old.get("mtime_ns") == new.get("mtime_ns"):
        return True
    if "sha256" in old and path is not None:
        try:
            return _sha256(Path(path)) == old["sha256"]
        except FileNotFoundError:
            return False
    return False


def _show(value: Any) -> str:
    text = json.dumps(value)
    return text if len(text) <= 40 else text[:37] + "..."


def changes(previous: Mapping[str, Any] | None, current: Mapping[str, Any],
            out: str | os.PathLike = ".") -> list[str]:
    """What differs between a marker's record and this run's fingerprint, one phrase each;
    empty when the output dir is done with this fingerprint."""
    if previous is None:
        return ["not done"]
    if previous.get("format") != _FORMAT or "options" not in previous:
        return ["no fingerprint recorded"]
    found = []
    old_opts, new_opts = previous["options"], current["options"]
    for key in sorted(set(old_opts) | set(new_opts)):
        if old_opts.get(key, "<unset>") != new_opts.get(key, "<unset>"):
            found.append(f"{key} {_show(old_opts.get(key, '<unset>'))} -> "
                         f"{_show(new_opts.get(key, '<unset>'))}")
    old_in, new_in = previous.get("inputs", {}), current["inputs"]
    for path in sorted(set(old_in) | set(new_in)):
        old, new = old_in.get(path), new_in.get(path)
        if path not in old_in or (old is None and new is not None):
            found.append(f"new input {path}")
        elif path not in new_in:
            found.append(f"{path} no longer an input")
        elif new is None:
            if old is not None:  # missing then and now: no change
                found.append(f"input {path} gone")
        elif not same_file(old, new, path):
            found.append(f"input {path} changed")
    outputs = previous.get("outputs", {})
    now = describe_files(Path(out) / name for name in outputs)
    for name, old in outputs.items():
        if not same_file(old, now[resolved(Path(out) / name)]):
            found.append(f"output {Path(out) / name} changed or gone")
    return found


@dataclass(frozen=True)
class Skipped:
    """What every stage function returns for work already done with these options and inputs
    (``check_done`` has logged the skip line): nothing ran, so there is no fresh summary. One
    type for all of them, so a caller tells a skip from a result the same way everywhere."""

    out: Path
    stage: str


@dataclass(frozen=True)
class StageCheck:
    """The verdict of ``check_done``; ``mark_done()`` records this run's fingerprint."""

    out: Path
    stage: str
    record: dict[str, Any]
    done: bool
    changes: tuple[str, ...]  # why an earlier run's output does not count (empty: none was there)
    marker_mtime_ns: int | None  # when an earlier run that does not count was marked done

    def mark_done(self, outputs: Iterable[str] = ()) -> None:
        """Write the marker with this run's fingerprint (last, atomically).

        ``outputs`` (names in the output dir) are recorded too: a later check finds the stage
        not done when one of them was changed or removed since."""
        record_done(self.out, self.stage, self.record, outputs)

    def skipped(self) -> Skipped:
        """The stage function's result when ``done``."""
        return Skipped(self.out, self.stage)


def record_done(out: str | os.PathLike, stage: str, record: Mapping[str, Any],
                outputs: Iterable[str] = (), hash_inputs: bool = False) -> None:
    """Write ``stage``'s marker in ``out`` holding ``record`` (see ``fingerprint``).

    ``hash_inputs``: large inputs get their content hash too (read once, now), those still as
    the record saw them, so a later run tells a touched but unchanged file from a changed one
    (worth a read of the features at the end of a training, not of every stage)."""
    outputs = list(outputs)
    described = describe_files(Path(out) / name for name in outputs)
    if hash_inputs:
        record = {**record, "inputs": _with_hashes(record.get("inputs", {}))}
    full = {"format": _FORMAT, "stage": stage, **record,
            "outputs": {name: described[resolved(Path(out) / name)] for name in outputs}}
    marker = done_marker(out, stage)
    with naming_full_disk(marker, "the done marker"), atomic_write(marker) as f:
        json.dump(full, f, indent=1, sort_keys=True)
        f.write("\n")


def _with_hashes(inputs: Mapping[str, Any]) -> dict[str, Any]:
    """``inputs`` with a content hash added to each entry lacking one whose file is still as
    the entry describes it (same size and mtime)."""
    hashed = dict(inputs)
    for path, entry in inputs.items():
        if entry is None or "sha256" in entry:
            continue
        now = _file_entry(Path(path))
        if now is not None and (now["size"], now["mtime_ns"]) == (entry["size"],
                                                                     entry["mtime_ns"]):
            hashed[path] = {**entry, "sha256": _sha256(Path(path))}
    return hashed


def skip_line(out: str | os.PathLike, stage: str, record: Mapping[str, Any] | None = None) -> str:
    """The one line of a skipped stage; with the marker's ``record``, what was compared."""
    line = (f"{out}: {stage} already done with these options and inputs; skipping "
            f"(remove {done_marker(out, stage)} to redo)")
    if record is None:
        return line
    files = [e for e in record.get("inputs", {}).values() if e is not None]
    hashed = sum("sha256" in e for e in files)
    return (f"{line}; compared {len(record.get('options', {}))} options and {len(files)} input "
            f"files ({hashed} by content, {len(files) - hashed} by size and mtime)")


def check_done(
    out: str | os.PathLike,
    stage: str,
    options: Mapping[str, Any],
    inputs: Iterable[str | os.PathLike] = (),
    clear: bool = True,
) -> StageCheck:
    """Is ``out`` done by ``stage`` with these options and inputs? Logs the one skip line, or
    what changed since an earlier run; then (``clear``) removes that run's marker, so the
    output dir does not look complete until the caller's ``mark_done()``."""
    record = fingerprint(options, inputs)
    previous = read_marker(out, stage)
    found = changes(previous, record, out) if previous is not None else []
    check = StageCheck(Path(out), stage, record, previous is not None and not found,
                       tuple(found), None)
    if check.done:
        log.info("%s", skip_line(out, stage, previous))
        return check
    if previous is not None:
        shown = "; ".join(found[:_SHOWN])
        more = f"; and {len(found) - _SHOWN} more" if len(found) > _SHOWN else ""
        log.info("%s: %s was done with other options or inputs (%s%s); redoing it",
                 out, stage, shown, more)
        with contextlib.suppress(FileNotFoundError):
            mtime = done_marker(out, stage).stat().st_mtime_ns
            check = StageCheck(check.out, stage, record, False, check.changes, mtime)
        if clear:
            clear_done(out, stage)
    return check
