"""Flat-start monophone GMM-HMM training (Kaldi's steps/train_mono.sh) over kaldi-hmm-gmm.

Schedule as train_mono.sh: equal alignment and one update from the single-Gaussian 0.mdl,
then EM passes that Viterbi-realign on ``realign_iters``, accumulate, update, and mix up by a
fixed increment per pass until ``max_iter_inc``. Then, as steps/align_si.sh, every utterance
(not only a ``max_utts`` training subset) is aligned with the final model, and the exp dir is
written as a Kaldi alignment dir: ali.N.gz, final.mdl, tree, num_jobs, phones.txt,
final.occs, cmvn_opts, log/.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, replace
from pathlib import Path

import kaldi_hmm_gmm as khg  # noqa: F401  (before kaldifst, which the gmm modules load)
import numpy as np

from asrdist.gmm.align_job import AlignJob
from asrdist.gmm.decodable import optional_silence
from asrdist.gmm.em import (
    EmOptions,
    IterRecord,
    align_everything,
    check_transcripts,
    clear_outputs,
    em_pass,
    log_to,
    write_exp_dir,
    write_passes,
)
from asrdist.gmm.model import MonoModel, init_mono
from asrdist.jobs import LOCAL, Jobs, Runner, split
from asrdist.kaldi.data_dir import DataDir, read_table
from asrdist.kaldi.gmm_feats import GMM_TABLES, load_features
from asrdist.kaldi.lang import Lang
from asrdist.progress import progress
from asrdist.stage import Skipped, check_done

log = logging.getLogger(__name__)

STAGE = "align_gmm"
KALDI_REALIGN_ITERS = (1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 12, 14, 16, 18, 20, 23, 26, 29, 32, 35, 38)


@dataclass
class MonoOptions(EmOptions):
    """train_mono.sh's options.

    25 passes instead of Kaldi's 40 (same realignment schedule, cut at 25), so the mini
    corpus's 3 h trains and aligns in about 2.5 minutes with 2 jobs; by pass 25 the gain is
    about 0.1 nat/frame per pass. All utterances train by default; ``max_utts`` trains on the
    shortest ones (Kaldi's train_10kshort) for larger corpora, and all are aligned at the end.
    """

    realign_iters: tuple[int, ...] = KALDI_REALIGN_ITERS
    max_utts: int | None = None  # train on the shortest N utterances, then align all
    init_utts: int = 10  # utterances whose global mean/variance initialise the GMMs
    first_beam: float = 6.0  # train_mono.sh's initial_beam (first pass; regular_beam 10 after)


@dataclass
class MonoSummary:
    """What the run measured."""

    iters: list[IterRecord]
    num_utts: int
    num_train_utts: int
    aligned: int
    failed: list[str]
    seconds: float


def _utt_lengths(data: DataDir) -> dict[str, int]:
    path = data.path / "utt2num_frames"
    if path.is_file():
        return {u: int(n) for u, n in read_table(path, require_value=True).items()}
    return {u: f.shape[0] for u, f in load_features(data, data.utts).items()}


def _train_subset(data: DataDir, max_utts: int | None) -> list[str]:
    """The shortest ``max_utts`` utterances (subset_data_dir.sh --shortest), or all."""
    if max_utts is None or max_utts >= len(data.utts):
        return list(data.utts)
    lengths = _utt_lengths(data)
    shortest = sorted(data.utts, key=lambda u: (lengths.get(u, 0), u))[:max_utts]
    return sorted(shortest, key=str.encode)


def _check_transcripts(data: DataDir, lang: Lang, map_oov: bool) -> None:
    for u in data.utts:
        lang.word_ids(u, data.text[u], map_oov)


def train_mono(
    data_dir: Path, lang_dir: Path, exp_dir: Path, opts: MonoOptions | None = None,
    runner: Runner = LOCAL,
) -> MonoSummary | Skipped:
    """Train a monophone system on ``data_dir`` and write ``exp_dir``, its ``nj`` jobs run by
    ``runner``; Skipped when ``exp_dir`` is done with the same options and inputs
    (asrdist.stage), which are the whole data and lang dirs. ``nj`` is left out of the
    fingerprint: it only splits the work (and the ali.N.gz files)."""
    opts = opts or MonoOptions()
    exp_dir = Path(exp_dir)
    options = opts.identity()
    check = check_done(exp_dir, STAGE, options, [data_dir, lang_dir])
    if check.done:
        return check.skipped()
    data, lang = DataDir.load(data_dir, GMM_TABLES), Lang.load(Path(lang_dir))
    check_transcripts(data, lang, opts.map_oov)
    exp_dir.mkdir(parents=True, exist_ok=True)
    clear_outputs(exp_dir)
    start = time.time()
    with log_to(exp_dir / "log" / "train_mono.log"):
        train_utts = _train_subset(data, opts.max_utts)
        model = init_mono(lang.topology(), lang.phone_sets,
                          load_features(data, train_utts[: opts.init_utts]).values())
        parts = split(data.utts, opts.nj)
        log.info("init: %d pdfs, feature dim %d, %d utterances (%d for training), %d jobs",
                 model.am.num_pdfs, model.am.dim, len(data.utts), len(train_utts), len(parts))
        with runner.start("align", AlignJob, [
                (data.path, lang.path, part, train_utts, model.tree, model.trans_model,
                 opts.map_oov) for part in parts]) as jobs:
            log.info("features and training graphs ready (%.1f s)", time.time() - start)
            silence = optional_silence(lang) if opts.boost_silence != 1.0 else []
            records, occs = _em(jobs, model, opts, silence)
            write_passes(exp_dir / "log" / "passes.tsv", records)
            final = align_everything(jobs, model, opts, silence, data)
            write_exp_dir(exp_dir, lang, jobs, model, occs)
        summary = MonoSummary(records, len(data.utts), len(train_utts), final.aligned,
                              final.failed, time.time() - start)
        log.info("done in %.1f s", summary.seconds)
    check.mark_done()
    return summary


def _em(jobs: Jobs, model: MonoModel, opts: MonoOptions,
        silence: list[int]) -> tuple[list[IterRecord], np.ndarray]:
    """Iteration 0 on equal alignments, then passes 1 .. num_iters-1 (train_mono.sh)."""
    records: list[IterRecord] = []
    occs = np.zeros(model.am.num_pdfs, dtype=np.float32)
    num_gauss = model.am.num_gauss
    inc = max((opts.total_gauss - num_gauss) // max(opts.last_inc_iter(), 1), 0)
    first = replace(opts.align, beam=opts.first_beam)  # retry_beam stays (train_mono.sh: 40)
    with progress(opts.num_iters, "mono", "iter") as bar:
        for it in range(opts.num_iters):
            realigned_before = any(r.realigned and r.iteration > 0 for r in records)
            rec, occs = em_pass(jobs, model, it, num_gauss, opts,
                                opts.align if realigned_before else first, silence)
            records.append(rec)
            if 0 < it <= opts.last_inc_iter():
                num_gauss += inc
            bar.update()
    return records, occs
