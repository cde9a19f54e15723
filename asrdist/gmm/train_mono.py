"""Flat-start monophone GMM-HMM training (Kaldi's steps/train_mono.sh) over kaldi-hmm-gmm.

Schedule as train_mono.sh: equal alignment and one update from the single-Gaussian 0.mdl,
then EM passes that Viterbi-realign on ``realign_iters``, accumulate, update, and mix up by a
fixed increment per pass until ``max_iter_inc``. Then, as steps/align_si.sh, every utterance
(not only a ``max_utts`` training subset) is aligned with the final model, and the exp dir is
written as a Kaldi alignment dir: ali.N.gz, final.mdl, tree, num_jobs, phones.txt,
final.occs, cmvn_opts, log/.
"""

from __future__ import annotations

import contextlib
import logging
import shutil
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import kaldi_hmm_gmm as khg  # before kaldifst, which the gmm modules load
import numpy as np

from asrdist.errors import AsrdistError
from asrdist.fsutil import atomic_path, atomic_write
from asrdist.gmm.align_job import AlignJob, AlignResult
from asrdist.gmm.decodable import aligning_am, optional_silence
from asrdist.gmm.model import MonoModel, init_mono
from asrdist.gmm.stats import estimate
from asrdist.hmm.align import AlignOptions
from asrdist.hmm.tree import write_tree
from asrdist.jobs import LOCAL, Jobs, Runner, split
from asrdist.kaldi.alignments import write_alignments
from asrdist.kaldi.data_dir import DataDir, read_table
from asrdist.kaldi.final_mdl import write_final_mdl
from asrdist.kaldi.gmm_feats import GMM_TABLES, load_features
from asrdist.kaldi.io_funcs import KaldiWriter
from asrdist.kaldi.lang import Lang
from asrdist.progress import progress
from asrdist.stage import Skipped, check_done

log = logging.getLogger(__name__)

STAGE = "align_gmm"
KALDI_REALIGN_ITERS = (1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 12, 14, 16, 18, 20, 23, 26, 29, 32, 35, 38)


@dataclass
class MonoOptions:
    """train_mono.sh's options.

    25 passes instead of Kaldi's 40 (same realignment schedule, cut at 25), so the mini
    corpus's 3 h trains and aligns in about 2.5 minutes with 2 jobs; by pass 25 the gain is
    about 0.1 nat/frame per pass. All utterances train by default; ``max_utts`` trains on the
    shortest ones (Kaldi's train_10kshort) for larger corpora, and all are aligned at the end.
    """

    nj: int = 2
    num_iters: int = 25
    max_iter_inc: int | None = None  # last pass that adds Gaussians; default 3/4 of num_iters
    total_gauss: int = 1000
    realign_iters: tuple[int, ...] = KALDI_REALIGN_ITERS
    max_utts: int | None = None  # train on the shortest N utterances, then align all
    map_oov: bool = False
    power: float = 0.25
    init_utts: int = 10  # utterances whose global mean/variance initialise the GMMs
    first_beam: float = 6.0  # train_mono.sh's initial_beam (first pass; regular_beam 10 after)
    boost_silence: float = 1.0  # train_mono.sh's default; WSJ's run.sh passes 1.25
    align: AlignOptions = field(default_factory=AlignOptions)

    def __post_init__(self) -> None:
        if self.boost_silence <= 0:
            raise AsrdistError(f"--boost-silence {self.boost_silence}: must be positive")

    def last_inc_iter(self) -> int:
        return self.max_iter_inc if self.max_iter_inc is not None else self.num_iters * 3 // 4


@dataclass
class IterRecord:
    """One EM pass, as train_mono.sh's logs report it."""

    iteration: int
    log_like_per_frame: float
    frames: int
    num_gauss: int
    realigned: bool
    align_failed: int
    seconds: float
    aligned: int = 0  # utterances aligned on this pass (0 when not realigned)


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


def _sum_align(results: list[AlignResult]) -> AlignResult:
    return AlignResult(
        aligned=sum(r.aligned for r in results),
        failed=[u for r in results for u in r.failed],
        log_like=sum(r.log_like for r in results),
        frames=sum(r.frames for r in results),
    )


@contextlib.contextmanager
def _log_to(path: Path) -> Iterator[None]:
    """Also write this module's log lines to ``path`` (Kaldi keeps logs in exp/*/log)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handler = logging.FileHandler(path, mode="w")
    handler.setFormatter(logging.Formatter("%(asctime)s %(message)s"))
    log.addHandler(handler)
    old_level = log.level
    log.setLevel(logging.INFO)
    try:
        yield
    finally:
        log.removeHandler(handler)
        log.setLevel(old_level)
        handler.close()


def _clear_outputs(exp_dir: Path) -> None:
    for pattern in ("ali.*.gz", "final.mdl", "final.occs", "tree", "num_jobs", "phones.txt"):
        for p in exp_dir.glob(pattern):
            p.unlink()


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
    options = {k: v for k, v in asdict(opts).items() if k != "nj"}
    check = check_done(exp_dir, STAGE, options, [data_dir, lang_dir])
    if check.done:
        return check.skipped()
    if opts.nj < 1 or opts.num_iters < 1 or opts.total_gauss < 1:
        raise AsrdistError("--nj, --num-iters and --total-gauss must be positive")
    data, lang = DataDir.load(data_dir, GMM_TABLES), Lang.load(Path(lang_dir))
    _check_transcripts(data, lang, opts.map_oov)
    exp_dir.mkdir(parents=True, exist_ok=True)
    _clear_outputs(exp_dir)
    start = time.time()
    with _log_to(exp_dir / "log" / "train_mono.log"):
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
            _write_passes(exp_dir / "log" / "passes.tsv", records)
            jobs.call("set_model", model.am, model.trans_model)
            final = _sum_align(jobs.call("realign", opts.align, True,
                                         _align_am(model, opts, silence)))
            log.info("final alignment of all %d utterances: %d aligned, %d failed %s",
                     len(data.utts), final.aligned, len(final.failed), " ".join(final.failed[:10]))
            if final.aligned == 0:
                raise AsrdistError(f"{data.path}: no utterance could be aligned")
            _write_outputs(exp_dir, lang, jobs, model, occs)
        summary = MonoSummary(records, len(data.utts), len(train_utts), final.aligned,
                              final.failed, time.time() - start)
        log.info("done in %.1f s", summary.seconds)
    check.mark_done()
    return summary


def _align_am(model: MonoModel, opts: MonoOptions, silence: list[int]) -> khg.AmDiagGmm | None:
    """The model to align with: silence boosted (gmm-boost-silence), or None for the model."""
    return aligning_am(model.am, model.trans_model, silence, opts.boost_silence)


def _write_passes(path: Path, records: list[IterRecord]) -> None:
    """Per-pass figures as a table (RESULTS.md shows it): was it realigned, how many
    utterances aligned and failed, the average log-likelihood per frame."""
    with atomic_write(path) as f:
        f.write("pass\trealigned\taligned\tfailed\tlog_like_per_frame\tframes\tgaussians"
                "\tseconds\n")
        for r in records:
            f.write(f"{r.iteration}\t{int(r.realigned)}\t{r.aligned}\t{r.align_failed}\t"
                    f"{r.log_like_per_frame:.4f}\t{r.frames}\t{r.num_gauss}\t{r.seconds:.1f}\n")


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
            rec, occs = _em_pass(jobs, model, it, num_gauss, opts,
                                 opts.align if realigned_before else first, silence)
            records.append(rec)
            if 0 < it <= opts.last_inc_iter():
                num_gauss += inc
            bar.update()
    return records, occs


def _em_pass(jobs: Jobs, model: MonoModel, it: int, num_gauss: int, opts: MonoOptions,
             align_opts: AlignOptions, silence: list[int]) -> tuple[IterRecord, np.ndarray]:
    """(Re)align if scheduled, accumulate, update, mix up to ``num_gauss``."""
    t0 = time.time()
    jobs.call("set_model", model.am, model.trans_model)
    ali = None
    if it == 0:
        ali = _sum_align(jobs.call("equal_align"))
    elif it in opts.realign_iters:
        ali = _sum_align(jobs.call("realign", align_opts, False,
                                   _align_am(model, opts, silence)))
    if ali is not None and ali.aligned == 0:
        raise AsrdistError(f"no training utterance could be aligned (e.g. {ali.failed[0]})")
    parts = jobs.call("accumulate")
    stats = parts[0]
    for part in parts[1:]:
        stats = stats + part
    update = estimate(model.am, model.trans_model, stats, mixup=num_gauss,
                      min_gaussian_occupancy=3.0 if it == 0 else 10.0, power=opts.power)
    rec = IterRecord(it, stats.log_like / max(stats.frames, 1), stats.frames, update.num_gauss,
                     ali is not None, len(ali.failed) if ali else 0, time.time() - t0,
                     ali.aligned if ali else 0)
    log.info("iter %d: log-like/frame %.4f over %d frames, %d gaussians, %s%.1f s",
             it, rec.log_like_per_frame, rec.frames, rec.num_gauss,
             f"aligned {ali.aligned} failed {len(ali.failed)}, " if ali else "", rec.seconds)
    return rec, stats.pdf_occupancy()


def _write_outputs(
    exp_dir: Path, lang: Lang, jobs: Jobs, model: MonoModel, occs: np.ndarray
) -> None:
    """The Kaldi alignment dir; final.mdl last, so an interrupted write never looks final."""
    alis = jobs.call("alignments")
    for n, part in enumerate(alis, 1):
        write_alignments(exp_dir / f"ali.{n}.gz", part)
    with atomic_write(exp_dir / "num_jobs") as f:
        f.write(f"{len(jobs)}\n")
    with atomic_path(exp_dir / "phones.txt") as tmp:
        shutil.copyfile(lang.path / "phones.txt", tmp)
    for name in ("cmvn_opts", "delta_opts"):  # empty: Kaldi defaults (CMN only; order-2 deltas)
        with atomic_write(exp_dir / name) as f:
            f.write("\n")
    writer = KaldiWriter(binary=True)
    writer.write_float_vector(occs)
    with atomic_write(exp_dir / "final.occs", "wb") as f:
        f.write(writer.getvalue())
    write_tree(exp_dir / "tree", model.tree)
    write_final_mdl(exp_dir / "final.mdl", model.trans_model, model.am)
