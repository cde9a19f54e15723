"""The data stage of recipes/swbd300 and recipes/swbd2000: every Kaldi data dir they need.

``OUT/train`` (all of Switchboard-1), ``OUT/train_dev`` (its first utterances) and
``OUT/train_nodup`` (the rest, duplicates capped), ``OUT/eval2000`` (with ``stm`` and ``glm``);
with Fisher also ``OUT/fisher`` and ``OUT/train_swbd_fisher`` (train_nodup + Fisher, the ~2000 h
set); with speed factors a ``_sp`` copy of the training set (Kaldi's ``train_nodup_sp``).
"""

from __future__ import annotations

import dataclasses
import logging
import os
from dataclasses import dataclass
from pathlib import Path

from asrdist.corpus.swbd import (
    dev_and_nodup,
    eval2000,
    fisher,
    ms98_acronyms,
    speed_perturbed,
    switchboard,
    write_corpus,
)
from asrdist.corpus.swbd_text import write_acronym_map
from asrdist.errors import AsrdistError
from asrdist.fsutil import atomic_write
from asrdist.stage import Skipped, check_done

log = logging.getLogger(__name__)

STAGE = "prepare-swbd"


@dataclass(frozen=True)
class SwbdOptions:
    """Where the LDC releases are and how the training set is cut (Kaldi's defaults)."""

    swbd_audio: str
    ms98: str
    eval2000_audio: str
    eval2000_ref: str
    fisher_audio: tuple[str, ...] = ()
    fisher_text: tuple[str, ...] = ()
    dev_utts: int = 4000
    max_dup: int = 300
    speed_factors: tuple[float, ...] = ()

    def __post_init__(self) -> None:
        if bool(self.fisher_audio) != bool(self.fisher_text):
            raise AsrdistError("--fisher-audio and --fisher-text go together (LDC2004S13/"
                               "LDC2005S13 audio and LDC2004T19/LDC2005T19 transcripts)")
        if self.dev_utts < 1:
            raise AsrdistError("--dev-utts must be at least 1")
        if self.max_dup < 2:  # utils/data/remove_dup_utts.sh:26
            raise AsrdistError("--max-dup must be at least 2 (as Kaldi's remove_dup_utts.sh)")
        if any(f <= 0 for f in self.speed_factors):
            raise AsrdistError(f"--speed-perturb factors must be positive: {self.speed_factors}")

    @property
    def train_set(self) -> str:
        """The data dir the acoustic model trains on."""
        base = "train_swbd_fisher" if self.fisher_text else "train_nodup"
        return base + ("_sp" if self.speed_factors else "")


def prepare_swbd(out: str | os.PathLike, options: SwbdOptions) -> Path | Skipped:
    """Write the data dirs into ``out``; Skipped when they are done already (asrdist.stage)."""
    out = Path(out)
    inputs = [options.swbd_audio, options.ms98, options.eval2000_audio, options.eval2000_ref,
              *options.fisher_audio, *options.fisher_text]
    swbd = switchboard(options.swbd_audio, options.ms98)  # checks the paths before the marker
    ev, stm, glm = eval2000(options.eval2000_audio, options.eval2000_ref)
    fsh = fisher(options.fisher_audio, options.fisher_text) if options.fisher_text else None
    out.mkdir(parents=True, exist_ok=True)
    check = check_done(out, STAGE, dataclasses.asdict(options), inputs)
    if check.done:
        return check.skipped()
    dev, nodup = dev_and_nodup(swbd, options.dev_utts, options.max_dup)
    sets = {"train": swbd, "train_dev": dev, "train_nodup": nodup}
    if fsh is not None:
        sets["fisher"] = fsh
        sets["train_swbd_fisher"] = nodup + fsh
    base = options.train_set.removesuffix("_sp")
    if options.speed_factors:
        sets[options.train_set] = speed_perturbed(sets[base], options.speed_factors)
    for name, corpus in sets.items():
        write_corpus(out / name, corpus)
        log.info("%s: %d utterances, %d recordings", out / name, len(corpus.segments),
                 len(corpus.audio))
    write_corpus(out / "eval2000", ev, {"stm": stm, "glm": glm})
    # where s5c keeps it (swbd1_prepare_dict.sh:85), for scoring with its acronyms mapped back
    amap = out / "local" / "dict_nosp" / "acronyms.map"
    amap.parent.mkdir(parents=True, exist_ok=True)
    with atomic_write(amap) as f:
        f.write(write_acronym_map(ms98_acronyms(options.ms98)))
    log.info("%s: %d utterances", out / "eval2000", len(ev.segments))
    check.mark_done()
    return out
