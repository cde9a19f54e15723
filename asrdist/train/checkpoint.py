"""Per-learner checkpoints, written atomically; :mod:`asrdist.train.resume` picks the step.

Layout: ``out/checkpoints/rank{r}/step{N:09d}.pt``. A file appears under its final name only
once complete (temp file + fsync + rename), so a crash while writing leaves the previous
checkpoints as they were (and a ``.step*.tmp`` file, removed when the run starts again). The
newest ``keep`` are kept, so a damaged newest file has an older one to fall back to; the older
ones go only once every learner of the lockstep set must hold the newer one
(:class:`Pruning`), so a set killed between one learner's write and another's still shares a
step to resume from, whatever ``keep``.

A checkpoint is data: it holds only plain data and tensors (:mod:`asrdist.plaindata`) and is
read with ``weights_only=True``, so a crafted file planted in a run dir runs no code on resume.
"""

from __future__ import annotations

import logging
import os
import pickle
import random
import re
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import torch

from asrdist.errors import AsrdistError, first_line
from asrdist.fsutil import write_atomically
from asrdist.parallel.rules.compression import from_format3
from asrdist.plaindata import first_unplain, mt19937_from_plain, mt19937_to_plain

_NAME = re.compile(r"^step(\d+)\.pt$")
# the layout of a checkpoint's dict: raise it when a key is added, renamed or changes meaning
# (3: plain data only, numpy's RNG state and the data stream's arrays as tensors; 4: a
# strategy's --compress state in one entry, asrdist.parallel.rules.compression's; a format-3
# checkpoint is read as format 4)
FORMAT = 4
# the entries the trainer writes and reads back on resume ("run" is checked by
# asrdist.train.resume, which says what its absence means)
ENTRIES = ("step", "epoch", "step_in_epoch", "frames", "wall_s", "interval", "strategy",
           "model", "optimizer", "scaler", "rng", "mask_rng", "stream", "queued", "input_dim",
           "num_pdfs", "model_config", "world_size", "noise_scale")
_UNSAFE = re.compile(r"Unsupported global: GLOBAL (\S+)")
log = logging.getLogger(__name__)


def checkpoint_dir(out: str | os.PathLike, rank: int) -> Path:
    return Path(out) / "checkpoints" / f"rank{rank}"


def checkpoint_path(out: str | os.PathLike, rank: int, step: int) -> Path:
    """Learner ``rank``'s checkpoint of ``step``."""
    return checkpoint_dir(out, rank) / f"step{step:09d}.pt"


def list_checkpoints(out: str | os.PathLike, rank: int) -> dict[int, Path]:
    """step -> complete checkpoint file of learner ``rank``."""
    found = {}
    directory = checkpoint_dir(out, rank)
    if directory.is_dir():
        for path in directory.iterdir():
            m = _NAME.match(path.name)
            if m:
                found[int(m.group(1))] = path
    return found


def remove_temp_files(out: str | os.PathLike, rank: int) -> list[Path]:
    """Remove the temporary files a killed writer left in this learner's checkpoint dir (and,
    for learner 0, in ``out`` itself); only call it before this run writes anything."""
    dirs = [checkpoint_dir(out, rank)] + ([Path(out)] if rank == 0 else [])
    removed = []
    for directory in dirs:
        for path in directory.glob(".*.tmp") if directory.is_dir() else []:
            if path.is_file():
                path.unlink(missing_ok=True)
                removed.append(path)
    return removed


def damage(path: Path) -> str | None:
    """Why a checkpoint file cannot be loaded (truncated, or a member fails its CRC); None when
    it reads whole. Reads the file once, without unpickling it."""
    try:
        with zipfile.ZipFile(path) as z:
            bad = z.testzip()
    except (OSError, zipfile.BadZipFile, EOFError) as e:
        return f"{type(e).__name__}: {e}"
    return None if bad is None else f"member {bad} fails its CRC check"


def save_checkpoint(out: str | os.PathLike, rank: int, step: int, state: dict[str, Any]) -> Path:
    """Write ``state`` for ``step`` atomically, stamped with :data:`FORMAT`; older checkpoints
    are left to :class:`Pruning`."""
    path = checkpoint_path(out, rank, step)
    stamped = {"format": FORMAT, **state}
    unplain = first_unplain(stamped)
    if unplain is not None:  # a bug: resuming would refuse the file
        raise TypeError(f"a checkpoint holds plain data only; found {unplain}")
    # through a file object torch reports a full disk as the OSError it is, not a zip error
    write_atomically(path, lambda f: torch.save(stamped, f), "checkpoint")
    return path


def prune_checkpoints(out: str | os.PathLike, rank: int, keep: int) -> None:
    """Drop all but learner ``rank``'s newest ``keep`` checkpoints."""
    held = list_checkpoints(out, rank)
    for old in sorted(held)[:-keep]:
        held[old].unlink(missing_ok=True)


class Pruning:
    """Drops a learner's older checkpoints only once its lockstep set must hold the newer one.

    A learner dropping them as soon as it wrote step N can be killed beside a peer still
    writing N: the two then share no step and the run cannot resume. No member passes the
    set's next meeting (every ``period`` steps) until all have reached it, so once this learner
    is ``period`` steps past N every member has written N. A learner alone prunes at once.
    """

    def __init__(self, out: str | os.PathLike, rank: int, keep: int, group_size: int,
                 period: int) -> None:
        self.out, self.rank, self.keep = out, rank, keep
        self.period = period if group_size > 1 else 0
        self.waiting: int | None = None  # the newest step not yet known to be on every member

    def saved(self, step: int) -> None:
        self.waiting = step
        self.stepped(step)

    def stepped(self, step: int) -> None:
        """Called after each step: prune once the waiting checkpoint is on every member."""
        if self.waiting is not None and step >= self.waiting + self.period:
            prune_checkpoints(self.out, self.rank, self.keep)
            self.waiting = None


def load_checkpoint(out: str | os.PathLike, rank: int, step: int) -> dict[str, Any]:
    """The checkpoint of ``step``, read as data only; one holding objects (an older asrdist's,
    or a crafted file), of another :data:`FORMAT` (but 3, migrated) or lacking an entry is
    refused in one line naming the file, never half-read."""
    path = checkpoint_path(out, rank, step)
    state = _read(path)
    found = state.get("format") if isinstance(state, dict) else None
    if found == 3 and isinstance(state.get("strategy"), dict):
        log.info("%s: a format-3 checkpoint, read as format %d", path, FORMAT)
        state = {**state, "format": FORMAT, "strategy": from_format3(state["strategy"])}
        found = FORMAT
    if found != FORMAT:
        said = "none (an older asrdist)" if found is None else found
        raise AsrdistError(f"{path}: checkpoint format {said}; this asrdist reads format "
                           f"{FORMAT}: resume it with the asrdist that wrote it, or train anew "
                           "in another --out")
    missing = [name for name in ENTRIES if name not in state]
    if missing:
        raise AsrdistError(f"{path}: not a whole checkpoint: it lacks its "
                           f"{', '.join(missing)} entr{'y' if len(missing) == 1 else 'ies'}")
    return state


@contextmanager
def restoring(path: Path, entry: str) -> Iterator[None]:
    """Restore checkpoint ``path``'s ``entry``: a key it lacks deeper down (loading checks the
    top level only) or a value of the wrong shape is one line naming both, not a traceback."""
    try:
        yield
    except KeyError as e:
        raise AsrdistError(f"{path}: not a whole checkpoint: its {entry} entry lacks "
                           f"{e.args[0]!r}") from e
    except (ValueError, TypeError) as e:
        raise AsrdistError(f"{path}: cannot restore its {entry} entry ({first_line(e)})") from e


def _read(path: Path) -> Any:
    """``torch.load`` as data only: a pickle naming any class or function is refused, unrun."""
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as e:
        named = _UNSAFE.search(str(e))
        what = f"an object ({named.group(1)})" if named else "objects"
        raise AsrdistError(f"{path}: refused: the checkpoint holds {what}, not only tensors "
                           "and plain data, and loading it could run code (a checkpoint of an "
                           f"asrdist older than format {FORMAT}, or a crafted file); train anew "
                           "in another --out") from e
    except Exception as e:  # noqa: BLE001 - any failure means an unusable checkpoint
        raise AsrdistError(f"{path}: cannot load checkpoint ({first_line(e)})") from e


def capture_rng(device: torch.device) -> dict[str, Any]:
    """Python, numpy and torch CPU generator states, and the CUDA generator of the learner's
    own ``device`` only: asking for every GPU's would start a CUDA context on each (in every
    learner, CPU learners too, and fail in a learner forked after its parent used CUDA)."""
    state = {
        "python": random.getstate(),
        "numpy": mt19937_to_plain(np.random.get_state(legacy=False)),
        "torch": torch.get_rng_state(),
    }
    if device.type == "cuda":
        state["cuda"] = torch.cuda.get_rng_state(device)
    return state


def restore_rng(state: dict[str, Any], device: torch.device) -> None:
    """Put back what :func:`capture_rng` took; CUDA's only on a CUDA ``device``."""
    random.setstate(state["python"])
    np.random.set_state(mt19937_from_plain(state["numpy"]))
    torch.set_rng_state(state["torch"])
    if "cuda" in state and device.type == "cuda":
        torch.cuda.set_rng_state(state["cuda"], device)
