"""The data stage of recipes/swbd300 and recipes/swbd2000: every Kaldi data dir they need, as
the Kaldi recipe their alignments come from makes it.

Without Fisher, egs/swbd/s5c: ``OUT/train`` (all of Switchboard-1), ``OUT/train_dev`` (its
first utterances), ``OUT/train_nodup`` (the rest, duplicates drawn down), ``OUT/eval2000`` (with
``stm`` and ``glm``, segments extended), ``OUT/local/dict_nosp/acronyms.map``.

With Fisher, egs/fisher_swbd/s5: ``OUT/train_swbd`` (Switchboard-1), ``OUT/train`` (Fisher +
all of Switchboard-1: its data/train_all), ``OUT/train_nodup`` (the duplicates of that drawn
down; no train_dev), ``OUT/eval2000`` (segments as the pem has them),
``OUT/local/dict_nosp/acronyms_swbd.map``.

With speed factors, ``OUT/train_nodup_sp``: the 1.0 copy prefixed ``sp1.0-`` as s5c's, or as it
is as fisher_swbd's (``always_include_prefix``).
"""

from __future__ import annotations

import dataclasses
import logging
import os
from dataclasses import dataclass
from pathlib import Path

from asrdist.corpus.swbd import (
    Corpus,
    dev_and_nodup,
    eval2000,
    fisher,
    ms98_acronyms,
    nodup,
    speed_perturbed,
    switchboard,
    write_corpus,
)
from asrdist.corpus.swbd_text import write_acronym_map
from asrdist.errors import AsrdistError
from asrdist.fsutil import atomic_write
from asrdist.kaldi.recipes import FISHER_SWBD, S5C
from asrdist.options import POSITIVE_NUMBERS, Options, at_least, option
from asrdist.stage import Skipped, check_done

log = logging.getLogger(__name__)

STAGE = "prepare-swbd"


@dataclass(frozen=True)
class SwbdOptions(Options):
    """Where the LDC releases are (the inputs, not options: asrdist-prepare-swbd's own flags)
    and how the training set is cut (declared options, Kaldi's defaults: the command's flags).

    ``always_include_prefix`` and ``extend_eval2000`` default (None) to the recipe's: s5c
    prefixes the sp 1.0 copy (run_ivector_common.sh: ``--always-include-prefix true``) and
    extends eval2000's segments (eval2000_data_prep.sh:72); fisher_swbd does neither."""

    swbd_audio: str
    ms98: str
    eval2000_audio: str
    eval2000_ref: str
    fisher_audio: tuple[str, ...] = ()
    fisher_text: tuple[str, ...] = ()
    dev_utts: int = option(4000, "train_dev: the first N utterances of Switchboard (s5c's 4000; "
                                 "not used with Fisher: fisher_swbd has no train_dev).",
                           check=at_least(1))
    max_dup: int = option(300, "train_nodup: about N utterances per transcript, drawn as "
                               "remove_dup_utts.sh.",
                          check=at_least(2))  # utils/data/remove_dup_utts.sh:26
    speed_factors: tuple[float, ...] = option(
        (), "Speed factors for a _sp copy of the training set, e.g. '0.9 1.0 1.1'.",
        check=POSITIVE_NUMBERS, name="speed_perturb")
    always_include_prefix: bool | None = option(
        None, "Prefix the speed-1.0 copy's utterances and speakers with sp1.0- (Kaldi's "
              "perturb_data_dir_speed_3way.sh option). Default: as the recipe the alignments "
              "come from: yes without Fisher (s5c), no with it (fisher_swbd).")
    extend_eval2000: bool | None = option(
        None, "Extend eval2000's segments by up to 0.1 s (s5c's extend_segments.pl). Default: "
              "yes without Fisher (s5c), no with it (fisher_swbd).")
    allow_partial: bool = option(
        False, "Go on when a release is not the size Kaldi's scripts check (2435 or 2438 "
               "Switchboard sph files, 11699 Fisher transcripts and sph files, 80 eval2000 "
               "sides): a partial corpus otherwise stops with the counts.")

    def __post_init__(self) -> None:
        if bool(self.fisher_audio) != bool(self.fisher_text):
            raise AsrdistError("--fisher-audio and --fisher-text go together (LDC2004S13/"
                               "LDC2005S13 audio and LDC2004T19/LDC2005T19 transcripts)")
        super().__post_init__()

    @property
    def recipe(self) -> str:
        """The Kaldi recipe whose data prep this is: fisher_swbd with Fisher, else s5c."""
        return FISHER_SWBD if self.fisher_text else S5C

    @property
    def train_set(self) -> str:
        """The data dir the acoustic model trains on (both recipes' train_nodup[_sp])."""
        return "train_nodup" + ("_sp" if self.speed_factors else "")

    def sp_prefix(self) -> bool:
        if self.always_include_prefix is not None:
            return self.always_include_prefix
        return self.recipe == S5C

    def extend(self) -> bool:
        if self.extend_eval2000 is not None:
            return self.extend_eval2000
        return self.recipe == S5C


def prepare_swbd(out: str | os.PathLike, options: SwbdOptions) -> Path | Skipped:
    """Write the data dirs into ``out``; Skipped when they are done already (asrdist.stage)."""
    out = Path(out)
    inputs = [options.swbd_audio, options.ms98, options.eval2000_audio, options.eval2000_ref,
              *options.fisher_audio, *options.fisher_text]
    recipe = options.recipe
    # checks the paths before the marker
    partial = options.allow_partial
    swbd = switchboard(options.swbd_audio, options.ms98, recipe, partial)
    ev, stm, glm = eval2000(options.eval2000_audio, options.eval2000_ref, options.extend(),
                            partial)
    fsh = (fisher(options.fisher_audio, options.fisher_text, partial) if options.fisher_text
           else None)
    out.mkdir(parents=True, exist_ok=True)
    check = check_done(out, STAGE, dataclasses.asdict(options), inputs)
    if check.done:
        return check.skipped()
    sets: dict[str, Corpus]
    if fsh is None:  # s5c run.sh stage 8
        dev, train_nodup = dev_and_nodup(swbd, options.dev_utts, options.max_dup)
        sets = {"train": swbd, "train_dev": dev, "train_nodup": train_nodup}
    else:  # fisher_swbd run.sh: train_all = Fisher + Switchboard, remove_dup_utts.sh 300
        train = fsh + swbd
        sets = {"train_swbd": swbd, "train": train, "train_nodup": nodup(train, options.max_dup)}
    if options.speed_factors:
        sets[options.train_set] = speed_perturbed(sets["train_nodup"], options.speed_factors,
                                                  options.sp_prefix())
    for name, corpus in sets.items():
        write_corpus(out / name, corpus)
        log.info("%s: %d utterances, %d recordings", out / name, len(corpus.segments),
                 len(corpus.audio))
    write_corpus(out / "eval2000", ev, {"stm": stm, "glm": glm})
    # where the recipe keeps it (s5c swbd1_prepare_dict.sh:85, fisher_swbd_prepare_dict.sh:137),
    # for scoring with its acronyms mapped back
    name = "acronyms_swbd.map" if recipe == FISHER_SWBD else "acronyms.map"
    amap = out / "local" / "dict_nosp" / name
    amap.parent.mkdir(parents=True, exist_ok=True)
    with atomic_write(amap) as f:
        f.write(write_acronym_map(ms98_acronyms(options.ms98, recipe), recipe))
    log.info("%s: %d utterances", out / "eval2000", len(ev.segments))
    check.mark_done()
    return out
