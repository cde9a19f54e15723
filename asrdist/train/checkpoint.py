"""Per-learner checkpoints, written atomically; :mod:`asrdist.train.resume` picks the step.

Layout: ``out/checkpoints/rank{r}/step{N:09d}.pt``. A file appears under its final name only
once complete (temp file + fsync + rename), so a crash while writing leaves the previous
checkpoints as they were (and a ``.step*.tmp`` file, removed when the run starts again); the
newest ``keep`` are kept, so a step all learners wrote survives a learner dying between its own
write and the others', and a damaged newest file has an older one to fall back to.
"""

from __future__ import annotations

import os
import random
import re
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import torch

from asrdist.errors import AsrdistError
from asrdist.fsutil import write_atomically

_NAME = re.compile(r"^step(\d+)\.pt$")
# the layout of a checkpoint's dict: raise it when a key is added, renamed or changes meaning
FORMAT = 2


def checkpoint_dir(out: str | os.PathLike, rank: int) -> Path:
    return Path(out) / "checkpoints" / f"rank{rank}"


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


def save_checkpoint(
    out: str | os.PathLike, rank: int, step: int, state: dict[str, Any], keep: int
) -> Path:
    """Write ``state`` for ``step`` atomically, stamped with :data:`FORMAT`, then drop all but
    the newest ``keep``."""
    path = checkpoint_dir(out, rank) / f"step{step:09d}.pt"
    stamped = {"format": FORMAT, **state}
    # through a file object torch reports a full disk as the OSError it is, not a zip error
    write_atomically(path, lambda f: torch.save(stamped, f), "checkpoint")
    for old in sorted(list_checkpoints(out, rank))[:-keep]:
        list_checkpoints(out, rank)[old].unlink(missing_ok=True)
    return path


def load_checkpoint(out: str | os.PathLike, rank: int, step: int) -> dict[str, Any]:
    """The checkpoint of ``step``; one of another :data:`FORMAT` (older or newer asrdist) is
    refused in one line naming both, never half-read."""
    path = checkpoint_dir(out, rank) / f"step{step:09d}.pt"
    try:
        state = torch.load(path, map_location="cpu", weights_only=False)
    except Exception as e:  # noqa: BLE001 - any failure means an unusable checkpoint
        raise AsrdistError(f"{path}: cannot load checkpoint ({e})") from e
    found = state.get("format") if isinstance(state, dict) else None
    if found != FORMAT:
        said = "none (an older asrdist)" if found is None else found
        raise AsrdistError(f"{path}: checkpoint format {said}; this asrdist reads format "
                           f"{FORMAT}: resume it with the asrdist that wrote it, or train anew "
                           "in another --out")
    return state


def capture_rng(device: torch.device) -> dict[str, Any]:
    """Python, numpy and torch CPU generator states, and the CUDA generator of the learner's
    own ``device`` only: asking for every GPU's would start a CUDA context on each (in every
    learner, CPU learners too, and fail in a learner forked after its parent used CUDA)."""
    state = {
        "python": random.getstate(),
        "numpy": np.random.get_state(),
        "torch": torch.get_rng_state(),
    }
    if device.type == "cuda":
        state["cuda"] = torch.cuda.get_rng_state(device)
    return state


def restore_rng(state: dict[str, Any], device: torch.device) -> None:
    """Put back what :func:`capture_rng` took; CUDA's only on a CUDA ``device``."""
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    if "cuda" in state and device.type == "cuda":
        torch.cuda.set_rng_state(state["cuda"], device)
