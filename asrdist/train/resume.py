"""Resuming a run: which checkpoint each learner resumes from (never from scratch while
checkpoints exist), and whether that checkpoint is of this run.

Learners that take every step together (a strategy's ``lockstep`` set: all learners of ssgd
and ma, the learners of one hadpsgd node) resume from the newest step all of them can read;
an asynchronous learner (adpsgd), alone in its set, resumes from its own newest readable
checkpoint, whatever step the others reached: asynchronous learners drift apart, and keeping
only the newest few checkpoints would otherwise leave no step in common. A damaged newest file
(truncated, failed CRC) falls back to the one before. When a set has checkpoint files but no
step all its members can read, the run stops with an error rather than retrain from step 0.

Every learner reports its files to all (one collective), so all take the same decision: the
same error on every learner, never one learner failing while the others wait for it.

The checkpoint found is then checked against this run: its shapes and model options, its
learner count (elastic runs may change it), and its identity (:mod:`asrdist.train.identity`),
up to what ``--resume-allow`` lets change.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from asrdist.errors import AsrdistError
from asrdist.models.build import ModelConfig
from asrdist.options import flag
from asrdist.stage import same_file
from asrdist.train.checkpoint import (
    checkpoint_path,
    damage,
    list_checkpoints,
    load_checkpoint,
    restoring,
)
from asrdist.train.config import TrainConfig, resume_allowed
from asrdist.train.identity import input_option, resume_free
from asrdist.train.metrics import metrics_path

log = logging.getLogger(__name__)


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


Gather = Callable[[Holdings], dict[int, Holdings]]  # every learner's, by rank (a collective)


@dataclass(frozen=True)
class Shape:
    """What a checkpoint must match beside the run's identity: the data's and the model's."""

    input_dim: int
    num_pdfs: int
    model_config: dict[str, Any]
    world_size: int


def find_resume_state(cfg: TrainConfig, identity: dict[str, Any], shape: Shape, rank: int,
                      group: tuple[int, ...], gather: Gather,
                      ) -> tuple[dict[str, Any] | None, dict[str, list[Any]]]:
    """The checkpoint this learner continues from (None: from the start), checked to be of
    this run, and the options ``--resume-allow`` let change (old and new, by name); every
    learner takes part (one gather), with or without ``--resume``, to refuse the same."""
    out = Path(cfg.out)
    mine = survey(out, rank, group)
    existing = resume_steps(out, gather(mine), cfg.resume)[rank]
    if not cfg.resume:
        return None, {}
    report_fallback(out, rank, mine, existing)
    if existing is None:
        return None, {}
    state = load_checkpoint(out, rank, existing)
    check_shape(cfg, state, shape)
    with restoring(checkpoint_path(out, rank, existing), "run"):
        return state, check_resumed_run(cfg, identity, state, rank)


def check_shape(cfg: TrainConfig, state: dict[str, Any], shape: Shape) -> None:
    """Refuse a checkpoint of other data, another model or another learner count (an elastic
    run goes on with the learners it has, each from its own rank's checkpoint)."""
    out = cfg.out
    if state["input_dim"] != shape.input_dim:
        raise AsrdistError(
            f"feature dimension {shape.input_dim} of {cfg.data} does not match the model's "
            f"input dimension {state['input_dim']} in the checkpoint of {out}")
    if state["num_pdfs"] != shape.num_pdfs:
        raise AsrdistError(f"{cfg.targets} has {shape.num_pdfs} pdfs; the checkpoint of "
                           f"{out} has {state['num_pdfs']}")
    # an option added since the checkpoint was written takes its default there
    defaults = ModelConfig().to_dict()
    if {**defaults, **state["model_config"]} != {**defaults, **shape.model_config}:
        raise AsrdistError(f"the model options differ from the checkpoint's in {out}")
    if state["world_size"] == shape.world_size:
        return
    if not cfg.option("elastic"):
        raise AsrdistError(f"{out} was trained by {state['world_size']} learner(s); resume it "
                           f"with as many, not {shape.world_size}")
    log.warning("%s was trained by %d learner(s); --elastic: going on with %d, each from its "
                "own rank's checkpoint", out, state["world_size"], shape.world_size)


def check_resumed_run(config: TrainConfig, identity: dict[str, Any], state: dict[str, Any],
                      rank: int) -> dict[str, list[Any]]:
    """Refuse to continue a run with options or inputs that change what it is, naming each
    option and both values; those --resume-allow lists are logged and returned, old and new
    by name (for the start record)."""
    out = Path(config.out)
    old = state.get("run")
    if old is None:
        raise AsrdistError(
            f"--resume: the checkpoint at step {state['step']} in {out} does not say "
            "what run it belongs to (written by an older asrdist): not trusted; choose "
            "another --out, or move its checkpoints away to train anew")
    new, free = identity, resume_free(config)
    found: dict[str, tuple[Any, Any]] = {}
    said: dict[str, str] = {}  # name -> how the refusal names the change
    old_opts, new_opts = old["options"], new["options"]
    for name in sorted(set(old_opts) & set(new_opts) - free):
        if old_opts[name] != new_opts[name]:
            found[name] = (old_opts[name], new_opts[name])
            said[name] = f"{flag(name)} {new_opts[name]} (the run's: {old_opts[name]})"
    for path in sorted(set(old["inputs"]) | set(new["inputs"])):
        if not same_file(old["inputs"].get(path), new["inputs"].get(path), path):
            name = input_option(config, path)
            if name not in found:
                found[name] = (f"{path} as the run read it", f"{path} changed")
                said[name] = f"{flag(name)} {getattr(config, name)}: {path} changed " \
                             "since the run read it"
    if not found:
        return {}
    allowed = resume_allowed(config)
    refused = [n for n in found if n not in allowed and "all" not in allowed]
    if refused:
        what = "; ".join(said[n] for n in refused)
        raise AsrdistError(
            f"--resume: {what}: the checkpoint at step {state['step']} in {out} is of "
            f"another run; resume with the run's values, pass --resume-allow "
            f"{','.join(refused)} to change it deliberately, or choose another --out")
    for name, (old_v, new_v) in found.items():
        log.warning("--resume: %s changed from %s to %s (--resume-allow); recorded in the "
                    "start record of %s", flag(name), old_v, new_v,
                    metrics_path(out, rank).name)
    return {name: [old_v, new_v] for name, (old_v, new_v) in found.items()}

