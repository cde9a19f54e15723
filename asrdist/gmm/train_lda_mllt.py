"""A tied-triphone GMM-HMM on LDA+MLLT features (Kaldi's steps/train_lda_mllt.sh: tri2b).

The CMN'd frames are spliced (3 each side), LDA to ``dim`` dimensions is estimated on them
with the previous system's pdfs as classes and silence frames weighted 0 (acc-lda, est-lda);
on those features a new tree is built and trained as train_deltas.sh does (asrdist.gmm.
train_deltas), and on ``mllt_iters`` an MLLT transform (gmm-acc-mllt, est-mllt) rotates the
features, the model's means follow it (gmm-transform-means) and it is composed into the
feature matrix (compose-transforms). The exp dir adds ``final.mat`` and ``splice_opts``, which
decoding and realignment apply (asrdist.kaldi.gmm_feats.FeatureTransform).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from functools import reduce
from pathlib import Path

import kaldi_hmm_gmm as khg  # noqa: F401  (before kaldifst, which the gmm modules load)
import numpy as np

from asrdist.errors import AsrdistError
from asrdist.fsutil import atomic_write
from asrdist.gmm.align_job import AlignJob
from asrdist.gmm.em import log_to
from asrdist.gmm.lda import LdaStats, write_matrix
from asrdist.gmm.mllt import MlltStats, compose_transforms, estimate_mllt, transform_khg_means
from asrdist.gmm.train_deltas import (
    DeltasOptions,
    DeltasSummary,
    begin,
    tied_system,
    train_and_align,
    tree_stats,
)
from asrdist.jobs import LOCAL, Runner, split
from asrdist.kaldi.am_gmm import am_params_from_khg
from asrdist.kaldi.data_dir import DataDir
from asrdist.kaldi.gmm_feats import GMM_TABLES, FeatureTransform, load_features
from asrdist.kaldi.lang import Lang
from asrdist.kaldi.transition_model import transition_info_from_khg
from asrdist.stage import Skipped

log = logging.getLogger(__name__)

STAGE = "train_lda_mllt"


@dataclass
class LdaMlltOptions(DeltasOptions):
    """train_lda_mllt.sh's options beyond train_deltas.sh's."""

    dim: int = 40
    left: int = 3  # splice_opts --left-context
    right: int = 3
    mllt_iters: tuple[int, ...] = (2, 4, 6, 12)


def _silence_phones(lang: Lang) -> set[int]:
    path = lang.path / "phones" / "silence.csl"
    try:
        return {int(x) for x in path.read_text().strip().split(":") if x}
    except (OSError, ValueError) as e:
        raise AsrdistError(f"{path}: unreadable ({e}); LDA and MLLT weight silence 0") from e


def _lda_stats_job(data_dir: Path, alis: dict[str, np.ndarray], tid_to_pdf: np.ndarray,
                   tid_to_phone: np.ndarray, silence: set[int], num_pdfs: int, left: int,
                   right: int) -> LdaStats:
    """acc-lda over one split: spliced frames, their aligned pdfs, silence weighted 0."""
    data = DataDir.load(data_dir, GMM_TABLES)
    feats = load_features(data, list(alis), FeatureTransform(left=left, right=right,
                                                             splice_only=True))
    stats: LdaStats | None = None
    for u, ali in alis.items():
        if feats[u].shape[0] != len(ali):
            raise AsrdistError(f"utterance {u}: {len(ali)} aligned frames but "
                               f"{feats[u].shape[0]} feature frames")
        stats = stats or LdaStats.zeros(num_pdfs, feats[u].shape[1])
        weights = (~np.isin(tid_to_phone[ali], sorted(silence))).astype(np.float64)
        stats.accumulate(feats[u], tid_to_pdf[ali], weights)
    if stats is None:
        raise AsrdistError(f"{data_dir}: an LDA job got no utterances")
    return stats


class LdaMlltJob(AlignJob):
    """An alignment job that also accumulates MLLT statistics (gmm-acc-mllt)."""

    def mllt_stats(self, silence: set[int]) -> MlltStats:
        assert self.am is not None, "set_model first"
        params = am_params_from_khg(self.am)
        info = transition_info_from_khg(self.trans_model)
        stats = MlltStats.zeros(params.dim)
        for u, ali in self.alis.items():
            weights = (~np.isin(info.tid_to_phone[ali], sorted(silence))).astype(np.float64)
            stats.accumulate(params, self.feats[u], info.tid_to_pdf[ali], weights)
        return stats


def train_lda_mllt(
    data_dir: Path, lang_dir: Path, ali_dir: Path, exp_dir: Path,
    opts: LdaMlltOptions | None = None, runner: Runner = LOCAL,
) -> DeltasSummary | Skipped:
    """Train an LDA+MLLT triphone system from ``ali_dir``'s alignments into ``exp_dir``;
    Skipped when it is done with the same options and inputs (``nj`` only splits work)."""
    opts = opts or LdaMlltOptions()
    exp_dir = Path(exp_dir)
    begun = begin(STAGE, data_dir, lang_dir, ali_dir, exp_dir, opts)
    if isinstance(begun, Skipped):
        return begun
    check, data, lang, old, alis = begun
    for name in ("final.mat", "splice_opts"):
        (exp_dir / name).unlink(missing_ok=True)
    start = time.time()
    silence = _silence_phones(lang)
    with log_to(exp_dir / "log" / "train_lda_mllt.log"):
        by_job = [{u: alis[u] for u in part} for part in split(sorted(alis), opts.nj)]
        lda = reduce(lambda a, b: a + b, runner.map("lda-stats", _lda_stats_job, [
            (data.path, part, old.tid_to_pdf, old.tid_to_phone, silence, old.num_pdfs,
             opts.left, opts.right) for part in by_job]))
        matrix = lda.estimate(dim=opts.dim).matrix
        write_matrix(exp_dir / "0.mat", matrix)
        log.info("LDA: %d x %d over %.0f non-silence frames", *matrix.shape, lda.occ.sum())
        transform = FeatureTransform(matrix, opts.left, opts.right)
        stats = tree_stats(runner, data, lang, old, alis, opts.nj, transform)
        model, converted, tree_summary = tied_system(stats, lang, opts, exp_dir, old, alis)
        parts = split(data.utts, opts.nj)
        current = {"matrix": matrix}

        def mllt(it: int) -> None:  # after a pass's realignment, before its accumulation
            if it not in opts.mllt_iters:
                return
            result = estimate_mllt(reduce(lambda a, b: a + b,
                                          jobs.call("mllt_stats", silence)))
            transform_khg_means(model.am, result.matrix)
            current["matrix"] = compose_transforms(result.matrix, current["matrix"])
            jobs.call("set_transform", FeatureTransform(current["matrix"], opts.left,
                                                        opts.right))
            jobs.call("set_model", model.am, model.trans_model)
            log.info("pass %d: MLLT gains %.4f per frame over %.0f frames", it,
                     result.objf_impr_per_frame, result.count)

        with runner.start("align", LdaMlltJob, [
                (data.path, lang.path, part, sorted(alis), model.tree, model.trans_model,
                 opts.map_oov, transform) for part in parts]) as jobs:
            final = train_and_align(jobs, parts, converted, model, opts, lang, data, exp_dir,
                                    mllt)
        write_matrix(exp_dir / "final.mat", current["matrix"])
        with atomic_write(exp_dir / "splice_opts") as f:
            f.write(f"--left-context={opts.left} --right-context={opts.right}\n")
        summary = DeltasSummary(tree_summary, final.iters, len(data.utts), final.aligned,
                                final.failed, time.time() - start)
        log.info("done in %.1f s", summary.seconds)
    check.mark_done()
    return summary
