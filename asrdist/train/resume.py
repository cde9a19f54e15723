"""Which checkpoint each learner resumes from: never from scratch while checkpoints exist.

Learners that take every step together (a strategy's ``lockstep`` set: all learners of ssgd
and ma, the learners of one hadpsgd node) resume from the newest step all of them can read;
an asynchronous learner (adpsgd), alone in its set, resumes from its own newest readable
checkpoint, whatever step the others reached: asynchronous learners drift apart, and keeping
only the newest few checkpoints would otherwise leave no step in common. A damaged newest file
(truncated, failed CRC) falls back to the one before. When a set has checkpoint files but no
step all its members can read, the run stops with an error rather than retrain from step 0.

Every learner reports its files to all (one collective), so all take the same decision: the
same error on every learner, never one learner failing while the others wait for it.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import torch.distributed as dist

from asrdist.errors import AsrdistError
from asrdist.train.checkpoint import damage, list_checkpoints

log = logging.getLogger(__name__)

T = TypeVar("T")


@dataclass(frozen=True)
class Holdings:
    """One learner's checkpoint files: every step, those that read whole, and its set."""

    steps: tuple[int, ...]
    readable: tuple[int, ...]
    damaged: dict[int, str]
    group: tuple[int, ...]


def survey(out: Path, rank: int, group: tuple[int, ...]) -> Holdings:
    """Check every checkpoint file of this learner (a lockstep set may need an older one
    than this learner's newest; there are only ``keep_checkpoints`` of them)."""
    found = list_checkpoints(out, rank)
    readable, damaged = [], {}
    for step in sorted(found, reverse=True):
        why = damage(found[step])
        if why is None:
            readable.append(step)
        else:
            damaged[step] = why
    return Holdings(tuple(sorted(found)), tuple(sorted(readable)), damaged, group)


def gather(mine: T, rank: int, world_size: int) -> dict[int, T]:
    """Every learner's ``mine`` (holdings, options) by rank; only this learner's without a
    process group."""
    if world_size == 1 or not (dist.is_available() and dist.is_initialized()):
        return {rank: mine}
    everyone: list[T | None] = [None] * world_size
    dist.all_gather_object(everyone, mine)
    return dict(enumerate(everyone))  # type: ignore[arg-type]


def resume_steps(out: Path, everyone: dict[int, Holdings], resume: bool) -> dict[int, int | None]:
    """The step each learner resumes from (None: from the start), the same on every learner;
    raises the same AsrdistError on every learner when the run cannot continue."""
    anything = any(h.steps for h in everyone.values())
    if not resume:
        if anything:
            raise AsrdistError(
                f"{out} holds checkpoints of an earlier run: pass --resume to continue it, or "
                "choose another --out"
            )
        return dict.fromkeys(everyone)
    steps: dict[int, int | None] = {}
    for rank, mine in everyone.items():
        group = tuple(r for r in mine.group if r in everyone) or (rank,)
        members = [everyone[r] for r in group]
        common = set.intersection(*(set(h.readable) for h in members))
        if common:
            steps[rank] = max(common)
        elif any(h.steps for h in members):
            raise AsrdistError(_nothing_usable(out, group, members))
        else:  # none of the set's checkpoints was written: it starts at step 0
            if anything:
                log.warning("%s: learner %d has no checkpoint yet; it starts at step 0 while "
                            "others resume", out, rank)
            steps[rank] = None
    if not anything:
        log.info("%s: no checkpoint to resume from; starting afresh", out)
    return steps


def _nothing_usable(out: Path, group: tuple[int, ...], members: list[Holdings]) -> str:
    held = "; ".join(
        f"learner {r}: " + (", ".join(
            f"step {s}" + (f" unreadable ({h.damaged[s][:80]})" if s in h.damaged else "")
            for s in h.steps) or "none")
        for r, h in zip(group, members, strict=True)
    )
    return (f"{out}: no checkpoint step that learner(s) {list(group)} can all resume from "
            f"({held}); not retraining from scratch: remove {out / 'checkpoints'} to start afresh")


def report_fallback(out: Path, rank: int, mine: Holdings, step: int | None) -> None:
    """Log the newer checkpoints this learner passes over, and why."""
    newer = [s for s in mine.steps if step is None or s > step]
    for s in newer:
        why = mine.damaged.get(s, "not written by every learner of its lockstep set")
        log.warning("%s: learner %d skips checkpoint step %d (%s); resuming from step %s",
                    out, rank, s, why, step)
