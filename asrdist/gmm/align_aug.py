"""Alignments for an augmented data dir from the model trained on the clean data, the Kaldi way.

- an utterance the clean alignment dir already holds keeps its alignment (the same final model
  aligned it: steps/align_si.sh would give the same path);
- a speed-perturbed copy (``sp<factor>-`` id) is Viterbi-aligned with the clean model, as
  Kaldi recipes run align_si.sh on train_sp with the clean model; its timing changed;
- any other copy (reverberated, noisy: same samples, same frames) takes the alignment of its
  clean utterance (utt2uniq), as Kaldi's copy_ali_dir.sh does for rvb copies.

Every alignment's length is checked against the copy's own features; a copy whose clean
utterance has no alignment (it failed to align) is left out, as Kaldi leaves it out.
"""

from __future__ import annotations

import logging
import re
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import kaldi_hmm_gmm as khg  # noqa: F401  (before kaldifst, which the gmm modules load)
import numpy as np

from asrdist.errors import AsrdistError
from asrdist.gmm.align_job import AlignJob
from asrdist.gmm.decodable import aligning_am, optional_silence
from asrdist.gmm.model import load_mono
from asrdist.hmm.ali_dir import alignment_inputs, read_ali_dir, write_ali_dir
from asrdist.hmm.align import AlignOptions
from asrdist.jobs import LOCAL, Runner, split
from asrdist.kaldi.data_dir import DataDir, read_table
from asrdist.kaldi.gmm_feats import GMM_TABLES, FeatureTransform
from asrdist.kaldi.lang import Lang
from asrdist.stage import Skipped, check_done

log = logging.getLogger(__name__)

STAGE = "align_aug"
SPEED_ID = re.compile(r"^sp\d+(\.\d+)?-")


@dataclass
class AugAlignSummary:
    reused: int  # clean utterances, alignment kept
    copied: int  # timing-preserving copies, alignment of the clean utterance
    realigned: int  # speed-perturbed copies aligned with the clean model
    failed: list[str]  # could not be aligned (or their clean utterance was not)
    seconds: float


def _checked(ali: np.ndarray, frames: int, utt: str, what: str) -> np.ndarray:
    if ali.size != frames:
        raise AsrdistError(f"{utt}: {what} has {ali.size} frames but its features have {frames} "
                           "(copies must keep the clean timing; speed copies need sp ids)")
    return ali


def align_augmented(data_dir: Path, lang_dir: Path, src_dir: Path, out_dir: Path,
                    nj: int = 2, opts: AlignOptions | None = None, map_oov: bool = False,
                    boost_silence: float = 1.0, runner: Runner = LOCAL
                    ) -> AugAlignSummary | Skipped:
    """Write ``out_dir``, a Kaldi alignment dir for every utterance of ``data_dir`` (MFCC
    feats.scp, cmvn.scp, text, utt2spk, utt2uniq) from the clean alignment dir ``src_dir``
    (final.mdl, tree, ali.*.gz), realigning in ``nj`` jobs run by ``runner``. ``map_oov`` and
    ``boost_silence`` are align_si.sh's (give the clean system's). Skipped when done with the
    same inputs (asrdist.stage)."""
    opts = opts or AlignOptions()
    data_dir, lang_dir, src_dir, out_dir = map(Path, (data_dir, lang_dir, src_dir, out_dir))
    if boost_silence <= 0:
        raise AsrdistError(f"--boost-silence {boost_silence}: must be positive")
    check = check_done(out_dir, STAGE, {**asdict(opts), "map_oov": map_oov,
                                        "boost_silence": boost_silence},
                       [data_dir, lang_dir, *alignment_inputs(src_dir)])
    if check.done:
        return check.skipped()
    if nj < 1:
        raise AsrdistError(f"--nj must be positive, got {nj}")
    start = time.time()
    data = DataDir.load(data_dir, GMM_TABLES)
    uniq_path = data_dir / "utt2uniq"
    utt2uniq = read_table(uniq_path, require_value=True) if uniq_path.is_file() else {}
    clean = read_ali_dir(src_dir)
    frames = data.num_frames()
    alis: dict[str, np.ndarray] = {}
    to_realign, failed = [], []
    reused = copied = 0
    for utt in data.utts:
        if utt in clean:
            alis[utt] = _checked(clean[utt], frames[utt], utt, f"{src_dir} alignment")
            reused += 1
        elif SPEED_ID.match(utt):
            to_realign.append(utt)
        elif utt not in utt2uniq:
            raise AsrdistError(f"{uniq_path}: no clean utterance for {utt} (and {src_dir} "
                               "has no alignment of it)")
        elif utt2uniq[utt] in clean:
            alis[utt] = _checked(clean[utt2uniq[utt]], frames[utt], utt,
                                 f"the alignment of {utt2uniq[utt]}")
            copied += 1
        else:
            failed.append(utt)
    realigned = _realign(data, Lang.load(lang_dir), src_dir, to_realign, nj, opts, map_oov,
                         boost_silence, runner)
    failed += [u for u in to_realign if u not in realigned]
    for utt, ali in realigned.items():
        alis[utt] = _checked(ali, frames[utt], utt, "the realignment")
    if not alis:
        raise AsrdistError(f"{data_dir}: no utterance could be aligned")
    write_ali_dir(out_dir, src_dir, [(u, alis[u]) for u in data.utts if u in alis], nj)
    summary = AugAlignSummary(reused, copied, len(realigned), failed, time.time() - start)
    log.info("%s: %d kept, %d copied, %d realigned, %d failed %s (%.1f s)", out_dir, reused,
             copied, len(realigned), len(failed), " ".join(failed[:5]), summary.seconds)
    check.mark_done()
    return summary


def _realign(data: DataDir, lang: Lang, src_dir: Path, utts: list[str], nj: int,
             opts: AlignOptions, map_oov: bool, boost: float,
             runner: Runner) -> dict[str, np.ndarray]:
    """gmm-align-compiled of ``utts`` with the clean model (silence boosted by ``boost``), in
    ``nj`` jobs."""
    if not utts:
        return {}
    model = load_mono(src_dir / "final.mdl", src_dir / "tree")
    am = aligning_am(model.am, model.trans_model,
                     optional_silence(lang) if boost != 1.0 else [], boost)
    transform = FeatureTransform.of_model_dir(src_dir)
    with runner.start("align", AlignJob, [
            (data.path, lang.path, part, part, model.tree, model.trans_model, map_oov, transform)
            for part in split(utts, nj)]) as jobs:
        jobs.call("set_model", model.am, model.trans_model)
        jobs.call("realign", opts, True, am)
        return {u: ali for part in jobs.call("alignments") for u, ali in part}
