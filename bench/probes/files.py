"""Issue 41's file scenarios, acted out for real: checkpoints are data (a crafted one runs no
code, an old or incomplete one is one line; so is an ark entry holding a pickle) and outputs
never follow a planted link.

Each probe takes an empty scratch dir and returns ``(ok, detail)``; ``python -m bench.probes
files`` prints them as rows.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

from asrdist.cli.train import main as train_main
from asrdist.testing.planted import (
    craft_ark_entry,
    craft_checkpoint,
    interrupted_run,
    invoke,
    loglikes_with_planted_ark,
    train_args,
    train_with_planted_lock,
)
from bench.probes.refusal import error_line, said


def crafted_checkpoint(scratch: Path) -> tuple[bool, str]:
    """crafted checkpoint: its pickle runs nothing on --resume"""
    resume, newest = interrupted_run(scratch)
    marker = scratch / "ran"
    craft_checkpoint(newest, marker)
    result = invoke(train_main, *resume)
    line = error_line(result)
    ok = line is not None and "refused" in line and not marker.exists()
    return ok, f"marker {'created' if marker.exists() else 'absent'}; {line or said(result)}"


def old_checkpoint(scratch: Path) -> tuple[bool, str]:
    """old-format checkpoint (numpy objects): one line naming it"""
    resume, newest = interrupted_run(scratch)
    state = torch.load(newest, weights_only=True)
    state["format"], state["rng"]["numpy"] = 2, np.random.get_state()
    torch.save(state, newest)
    result = invoke(train_main, *resume)
    line = error_line(result)
    return line is not None and str(newest) in line, line or said(result)


def missing_entry(scratch: Path) -> tuple[bool, str]:
    """checkpoint lacking its stream entry: one line naming both"""
    resume, newest = interrupted_run(scratch)
    state = torch.load(newest, weights_only=True)
    del state["stream"]
    torch.save(state, newest)
    result = invoke(train_main, *resume)
    line = error_line(result)
    ok = line is not None and str(newest) in line and "stream entry" in line
    return ok, line or said(result)


def pickled_ark_entry(scratch: Path) -> tuple[bool, str]:
    """feats.ark entry holding a pickle (PKL): runs nothing"""
    args = train_args(scratch)
    marker = scratch / "ran"
    ark = craft_ark_entry(scratch / "corpus" / "data" / "feats.scp", marker)
    result = invoke(train_main, *args)
    line = error_line(result)
    ok = line is not None and str(ark) in line and not marker.exists()
    return ok, f"marker {'created' if marker.exists() else 'absent'}; {line or said(result)}"


def planted_lock(scratch: Path) -> tuple[bool, str]:
    """train: planted .lock.learner0 link refused, target kept"""
    result, link, victim = train_with_planted_lock(scratch)
    line = error_line(result)
    kept = victim.read_text() == "precious\n"
    ok = line is not None and str(link) in line and kept
    return ok, f"target {'untouched' if kept else 'CHANGED'}; {line or said(result)}"


def planted_loglikes(scratch: Path) -> tuple[bool, str]:
    """loglikes: planted loglikes.ark link replaced, target kept"""
    result, link, victim = loglikes_with_planted_ark(scratch)
    kept = victim.read_text() == "precious\n"
    replaced = link.is_file() and not link.is_symlink()
    ok = result.exit_code == 0 and kept and replaced
    return ok, (f"target {'untouched' if kept else 'CHANGED'}; loglikes.ark "
                f"{'a file of its own' if replaced else 'still the link'}; {said(result)}")


PROBES: list[Callable[[Path], tuple[bool, str]]] = [
    crafted_checkpoint, old_checkpoint, missing_entry, pickled_ark_entry, planted_lock,
    planted_loglikes,
]
