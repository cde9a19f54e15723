"""What a training run is, and what becomes of the runs already in its ``--out``.

A run is its fingerprinted options (every option but those declared ``fingerprint=False``,
the input paths resolved, the learner count) and its inputs' content (:mod:`asrdist.stage`). All
learners must agree on it (:func:`check_same_options`). A finished run in ``--out`` that is
not this one is never deleted unasked (:func:`set_aside_finished_run`), and a checkpoint
resumed is checked to be of this run by :mod:`asrdist.train.resume`.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from asrdist.errors import AsrdistError
from asrdist.fsutil import done_marker
from asrdist.models.final import FILENAME as FINAL
from asrdist.options import fingerprinted, flag, not_taken, resumable, unrecorded
from asrdist.parallel import registry
from asrdist.stage import Skipped, StageCheck, check_done, read_marker, resolved
from asrdist.train.checkpoint import list_checkpoints
from asrdist.train.config import TrainConfig, all_fields, resume_allowed, strategy_fields
from asrdist.train.metrics import metrics_path

log = logging.getLogger(__name__)

def resume_free(config: TrainConfig) -> set[str]:
    """Options a --resume may change without --resume-allow: those declared so (``resumable``:
    those that do not change the model, an injected straggler), and how long to train when
    the learning rate does not depend on it (ibm's rate follows the epoch; kaldi's decay spans
    --epochs or --max-steps); an elastic run, its learner count."""
    return {n for n, f in all_fields().items() if resumable(f)} | (
        {"epochs", "max_steps"} if config.lr_schedule == "ibm" else set()) | (
        {"learners"} if config.option("elastic") else set())


def run_options(config: TrainConfig, world_size: int) -> dict[str, Any]:
    """What makes the model, beside its inputs' content: the fingerprinted training options
    and the --algo's own (another strategy's options, ignored by this run, do not count), the
    input paths resolved (every spelling of a directory is the same run), and the learner
    count; an option declared for some models or optimizers only (``when=``: the Conformer's
    sizes) counts for those only, one added later (``--objective``) only off its default."""
    unused = set(strategy_fields()) - set(registry.options_of(config.algo)) | not_taken(config)
    known = all_fields()
    options = {k: v for k, v in config.to_dict().items()
               if fingerprinted(known[k]) and k not in unused and not unrecorded(known[k], v)}
    for name in INPUT_OPTIONS:
        if options.get(name):
            options[name] = resolved(options[name])
    return {**options, "learners": world_size}


INPUT_OPTIONS = ("data", "targets", "init_dbn", "init_model", "denlats", "alignments")


def run_inputs(config: TrainConfig) -> list[str]:
    """The files whose change retrains the model (the RBM stack's, a sequence run's model,
    lattices and alignments too, when used)."""
    unused = not_taken(config)
    return [getattr(config, n) for n in INPUT_OPTIONS if n not in unused and getattr(config, n)]


def claim_run_dir(config: TrainConfig, rank: int, world_size: int,
                  gather: Callable[[Any], dict[int, Any]]) -> StageCheck | Skipped:
    """What becomes of ``--out``, decided by every learner alike (``gather``: one exchange,
    which also refuses learners started with different options): Skipped when every learner
    finds this run done there; else its check (``record``: this run's identity), a finished
    other run set aside first (:func:`set_aside_finished_run`)."""
    options = run_options(config, world_size)
    check = check_done(Path(config.out), "train", options, run_inputs(config), clear=False)
    verdicts = gather((options, check.done))
    check_same_options(verdicts)
    if all(done for _, done in verdicts.values()):
        return check.skipped()
    if check.marker_mtime_ns is not None:
        check_inputs_exist(config)  # a mistyped path must not move a finished run aside
        set_aside_finished_run(config, check, rank)
    return check


def check_inputs_exist(config: TrainConfig) -> None:
    """A one-line error naming the option of an input that does not exist, before anything in
    ``--out`` is touched."""
    for name in INPUT_OPTIONS:
        path = getattr(config, name)
        if path and not Path(path).exists():
            raise AsrdistError(f"{flag(name)} {path}: no such file or directory; the finished "
                               f"run in {config.out} is left as it is")


def _may_continue(config: TrainConfig, check: StageCheck) -> bool:
    """Whether every option that differs from the finished run's is one a --resume may
    change (free, or listed by --resume-allow)."""
    previous = (read_marker(config.out, "train") or {}).get("options", {})
    now = check.record["options"]
    changed = {k for k in set(previous) | set(now) if previous.get(k) != now.get(k)}
    allowed = resume_free(config) | resume_allowed(config)
    return "all" in allowed or changed <= allowed


def check_same_options(verdicts: dict[int, tuple[dict[str, Any], bool]]) -> None:
    """Refuse, on every learner alike, learners started with different options, naming each
    option that differs and the learners' values."""
    first = verdicts[min(verdicts)][0]
    different = sorted({name for options, _ in verdicts.values()
                        for name in set(options) | set(first)
                        if options.get(name) != first.get(name)})
    if different:
        said = "; ".join(
            f"{flag(name)}: " + ", ".join(f"learner {r} {opts.get(name, '<unset>')}"
                                          for r, (opts, _) in sorted(verdicts.items()))
            for name in different[:4])
        raise AsrdistError(f"the learners were started with different options ({said}); start "
                           "every learner with the same options")


def set_aside_finished_run(config: TrainConfig, check: StageCheck, rank: int) -> None:
    """A finished run in ``--out`` that does not count (other options or inputs): under
    --resume continued when every option that changed may change on a resume (as
    --resume-allow says: training it longer, say; the checkpoint's identity check follows),
    else refused; without --resume moved aside (each learner its own files, learner 0 the
    shared ones and the marker) or, with --discard-finished, deleted. Files written after it
    finished belong to an interrupted retraining (--resume continues it) and stay."""
    out, marked_ns = Path(config.out), check.marker_mtime_ns
    assert marked_ns is not None
    why = "; ".join(check.changes[:4])
    if config.resume and _may_continue(config, check):
        if rank == 0:
            log.info("%s: continuing the finished run (%s): --resume", out, why)
        return
    if config.resume:
        raise AsrdistError(
            f"--resume: {out} holds a finished run done with other options or inputs ({why}); "
            "left as it is: resume with its options, train anew without --resume (the "
            "finished run is moved aside), or choose another --out")
    mine = [*list_checkpoints(out, rank).values(), metrics_path(out, rank)]
    shared = [out / FINAL, out / "config.yaml"] if rank == 0 else []
    finished = [p for p in mine + shared if p.exists() and p.stat().st_mtime_ns <= marked_ns]
    marker = done_marker(out, "train")
    if config.discard_finished:
        for path in finished + ([marker] if rank == 0 else []):
            path.unlink(missing_ok=True)
        if rank == 0:
            log.warning("%s: deleted the finished run done with other options or inputs (%s): "
                        "--discard-finished", out, why)
        return
    aside = out / "superseded" / time.strftime("%Y%m%d-%H%M%S", time.gmtime(marked_ns / 1e9))
    for path in finished + ([marker] if rank == 0 else []):
        target = aside / path.relative_to(out)
        if path == marker:
            target = aside / "train.done.json"
        target.parent.mkdir(parents=True, exist_ok=True)
        os.replace(path, target)
    if rank == 0:
        log.warning("%s: the finished run was done with other options or inputs (%s); moved "
                    "to %s (--discard-finished deletes it instead); training anew", out, why,
                    aside)


def input_option(config: TrainConfig, path: str) -> str:
    """The option whose file or directory holds the input ``path``."""
    for name in INPUT_OPTIONS:
        given = getattr(config, name)
        root = resolved(given) if given else None
        if root and (path == root or path.startswith(root + os.sep)):
            return name
    return "data"
