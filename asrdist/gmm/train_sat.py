"""A speaker-adapted tied-triphone system (Kaldi's steps/train_sat.sh: tri3b), fMLLR per
speaker.

From the previous system's alignment dir (tri1 on deltas or tri2b on LDA+MLLT; its features
are kept, final.mat too): each training speaker's fMLLR transform estimated with that system's
model and alignments (silence weighted ``silence_weight``), then on the adapted features a new
tree and model as train_deltas.sh builds them (asrdist.gmm.train_deltas), with the transforms
re-estimated against the model being trained on ``fmllr_iters`` and composed with the last.
The exp dir adds ``trans.ark`` (the training speakers' transforms, Kaldi's trans.N in one
archive); test speakers get theirs from a first decoding pass (asrdist-est-fmllr).
"""

from __future__ import annotations

import copy
import logging
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

import kaldi_hmm_gmm as khg  # before kaldifst, which the gmm modules load
import numpy as np

from asrdist.fsutil import atomic_path
from asrdist.gmm.adapt import (
    FmllrOptions,
    estimate_transforms,
    silence_phones,
    speaker_stats,
    sum_speaker_stats,
)
from asrdist.gmm.align_job import AlignJob
from asrdist.gmm.em import log_to
from asrdist.gmm.fmllr import FmllrStats
from asrdist.gmm.model import MonoModel
from asrdist.gmm.stats import GmmStats, estimate
from asrdist.gmm.train_deltas import (
    DeltasOptions,
    DeltasSummary,
    begin,
    tied_system,
    train_and_align,
    tree_stats,
)
from asrdist.jobs import LOCAL, Jobs, Runner, split
from asrdist.kaldi.am_gmm import am_params_from_khg
from asrdist.kaldi.data_dir import DataDir
from asrdist.kaldi.final_mdl import read_final_mdl, write_final_mdl
from asrdist.kaldi.gmm_feats import (
    GMM_TABLES,
    FeatureTransform,
    load_features,
    write_speaker_transforms,
)
from asrdist.kaldi.transition_model import transition_info_from_khg
from asrdist.stage import Skipped

log = logging.getLogger(__name__)

STAGE = "train_sat"
KEPT = ("final.mat", "splice_opts")  # the previous system's feature transform, kept
ALIMDL = "final.alimdl"  # the speaker-independent model of the same tree (a first pass's)


@dataclass
class SatOptions(DeltasOptions):
    """train_sat.sh's options beyond train_deltas.sh's."""

    fmllr_iters: tuple[int, ...] = (2, 4, 6, 12)
    silence_weight: float = 0.0


def _si_stats_job(data_dir: Path, alis: dict[str, np.ndarray], ali_dir: Path,
                  opts: FmllrOptions) -> dict[str, FmllrStats]:
    """The first transforms' statistics over one split: the previous system's model and
    features (gmm-est-fmllr with the alignment dir's final.mdl)."""
    data = DataDir.load(data_dir, GMM_TABLES)
    info, am = read_final_mdl(ali_dir / "final.mdl")
    feats = load_features(data, list(alis), FeatureTransform.of_model_dir(ali_dir))
    return speaker_stats(am, info, ((u, feats[u], a) for u, a in alis.items()), data.speaker,
                         opts)


class SatJob(AlignJob):
    """An alignment job that also accumulates fMLLR statistics per speaker."""

    def fmllr_stats(self, opts: FmllrOptions) -> dict[str, FmllrStats]:
        assert self.am is not None, "set_model first"
        return speaker_stats(am_params_from_khg(self.am),
                             transition_info_from_khg(self.trans_model),
                             ((u, self.feats[u], a) for u, a in self.alis.items()),
                             self.data.speaker, opts)


def _write_alignment_model(jobs: Jobs, model: MonoModel, si: FeatureTransform,
                           path: Path) -> None:
    """train_sat.sh's final.alimdl: the final model re-estimated once on the unadapted
    features, the Gaussians' posteriors the adapted model's on the adapted ones
    (gmm-acc-stats-twofeats), low-count Gaussians kept, no mixing up, the transitions
    re-estimated from the same alignments (a copy: the final model's stay). Its tree is the final
    model's, so it decodes with the same graph and its lattices' transition-ids are the final
    model's: decode_fmllr.sh's first pass, with no transform yet."""
    stats = GmmStats.total(jobs.call("accumulate", si))
    am = khg.AmDiagGmm()
    am.copy_from_am_diag_gmm(model.am)
    trans = copy.deepcopy(model.trans_model)
    update = estimate(am, trans, stats, mixup=0, remove_low_count_gaussians=False)
    log.info("alignment model: %.4f per frame over %d frames on unadapted features",
             update.gmm_impr_per_frame, stats.frames)
    write_final_mdl(path, trans, am)


def train_sat(
    data_dir: Path, lang_dir: Path, ali_dir: Path, exp_dir: Path,
    opts: SatOptions | None = None, runner: Runner = LOCAL,
) -> DeltasSummary | Skipped:
    """Train a speaker-adapted system from ``ali_dir``'s alignments into ``exp_dir``;
    Skipped when it is done with the same options and inputs (``nj`` only splits work)."""
    opts = opts or SatOptions()
    exp_dir, ali_dir = Path(exp_dir), Path(ali_dir)
    begun = begin(STAGE, data_dir, lang_dir, ali_dir, exp_dir, opts)
    if isinstance(begun, Skipped):
        return begun
    check, data, lang, old, alis = begun
    for name in (*KEPT, "trans.ark", ALIMDL):
        (exp_dir / name).unlink(missing_ok=True)
    start = time.time()
    fmllr = FmllrOptions(opts.silence_weight, silence_phones(lang.path))
    base = FeatureTransform.of_model_dir(ali_dir)
    with log_to(exp_dir / "log" / "train_sat.log"):
        current, _ = estimate_transforms(sum_speaker_stats(runner.map(
            "fmllr-stats", _si_stats_job,
            [(data.path, {u: alis[u] for u in part}, ali_dir, fmllr)
             for part in split(sorted(alis), opts.nj)])), fmllr)
        stats = tree_stats(runner, data, lang, old, alis, opts.nj, base.with_speakers(current))
        model, converted, tree_summary = tied_system(stats, lang, opts, exp_dir, old, alis)
        parts = split(data.utts, opts.nj)

        def refine(it: int) -> None:  # after a pass's realignment, before its accumulation
            nonlocal current
            if it not in opts.fmllr_iters:
                return
            current, gain = estimate_transforms(
                sum_speaker_stats(jobs.call("fmllr_stats", fmllr)), fmllr, current)
            jobs.call("set_transform", base.with_speakers(current))
            log.info("pass %d: fMLLR gains %.4f per frame", it, gain)

        with runner.start("align", SatJob, [
                (data.path, lang.path, part, sorted(alis), model.tree, model.trans_model,
                 opts.map_oov, base.with_speakers(current)) for part in parts]) as jobs:
            final = train_and_align(jobs, parts, converted, model, opts, lang, data, exp_dir,
                                    refine)
            _write_alignment_model(jobs, model, base, exp_dir / ALIMDL)
        for name in KEPT:
            if (ali_dir / name).is_file():
                with atomic_path(exp_dir / name) as tmp:
                    shutil.copyfile(ali_dir / name, tmp)
        write_speaker_transforms(exp_dir / "trans.ark", current)
        summary = DeltasSummary(tree_summary, final.iters, len(data.utts), final.aligned,
                                final.failed, time.time() - start)
        log.info("done in %.1f s", summary.seconds)
    check.mark_done()
    return summary
