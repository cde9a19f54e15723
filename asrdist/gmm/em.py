"""The EM passes every GMM system trains with (train_mono.sh, train_deltas.sh,
train_lda_mllt.sh): realign on scheduled passes, accumulate, update, mix up; then align every
utterance with the final model and write the exp dir as a Kaldi alignment dir.
"""

from __future__ import annotations

import contextlib
import logging
import shutil
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path

import kaldi_hmm_gmm as khg  # before kaldifst, which the gmm modules load
import numpy as np

from asrdist.errors import AsrdistError
from asrdist.fsutil import atomic_path, atomic_write, open_output
from asrdist.gmm.align_job import AlignResult
from asrdist.gmm.decodable import aligning_am
from asrdist.gmm.model import MonoModel
from asrdist.gmm.stats import GmmStats, estimate
from asrdist.hmm.align import AlignOptions
from asrdist.hmm.tree import write_tree
from asrdist.jobs import Jobs
from asrdist.kaldi.alignments import write_alignments
from asrdist.kaldi.data_dir import DataDir
from asrdist.kaldi.final_mdl import write_final_mdl
from asrdist.kaldi.io_funcs import KaldiWriter
from asrdist.kaldi.lang import Lang

log = logging.getLogger("asrdist.gmm")


@dataclass
class EmOptions:
    """The options the training scripts share: jobs, passes, Gaussians, alignment."""

    nj: int = 2
    num_iters: int = 25
    max_iter_inc: int | None = None  # last pass that adds Gaussians; default 3/4 of num_iters
    total_gauss: int = 1000
    realign_iters: tuple[int, ...] = ()
    map_oov: bool = False
    power: float = 0.25
    boost_silence: float = 1.0
    align: AlignOptions = field(default_factory=AlignOptions)
    seed: int = 0  # of the mixing up's perturbations: another seed, another draw of the model

    def __post_init__(self) -> None:
        if self.boost_silence <= 0:
            raise AsrdistError(f"--boost-silence {self.boost_silence}: must be positive")
        if self.nj < 1 or self.num_iters < 1 or self.total_gauss < 1:
            raise AsrdistError("--nj, --num-iters and --total-gauss must be positive")

    def identity(self) -> dict:
        """The options a finished run is compared on: all but ``nj`` (it only splits the
        work), and the seed only when not 0 (runs made before it existed drew from 0)."""
        return {k: v for k, v in asdict(self).items()
                if k != "nj" and not (k == "seed" and v == 0)}

    def last_inc_iter(self) -> int:
        return self.max_iter_inc if self.max_iter_inc is not None else self.num_iters * 3 // 4


@dataclass
class IterRecord:
    """One EM pass, as the training scripts' logs report it."""

    iteration: int
    log_like_per_frame: float
    frames: int
    num_gauss: int
    realigned: bool
    align_failed: int
    seconds: float
    aligned: int = 0  # utterances aligned on this pass (0 when not realigned)


def sum_align(results: list[AlignResult]) -> AlignResult:
    return AlignResult(
        aligned=sum(r.aligned for r in results),
        failed=[u for r in results for u in r.failed],
        log_like=sum(r.log_like for r in results),
        frames=sum(r.frames for r in results),
    )


def check_transcripts(data: DataDir, lang: Lang, map_oov: bool) -> None:
    for u in data.utts:
        lang.word_ids(u, data.text[u], map_oov)


@contextlib.contextmanager
def log_to(path: Path) -> Iterator[None]:
    """Also write the GMM modules' log lines to ``path`` (Kaldi keeps logs in exp/*/log)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    stream = open_output(path, "w", encoding="utf-8")  # never through a link planted there
    handler = logging.StreamHandler(stream)
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
        stream.close()


def clear_outputs(exp_dir: Path) -> None:
    for pattern in ("ali.*.gz", "final.mdl", "final.occs", "tree", "num_jobs", "phones.txt"):
        for p in exp_dir.glob(pattern):
            p.unlink()


def align_am(model: MonoModel, opts: EmOptions, silence: list[int]) -> khg.AmDiagGmm | None:
    """The model to align with: silence boosted (gmm-boost-silence), or None for the model."""
    return aligning_am(model.am, model.trans_model, silence, opts.boost_silence)


def write_passes(path: Path, records: list[IterRecord]) -> None:
    """Per-pass figures as a table (RESULTS.md shows it): was it realigned, how many
    utterances aligned and failed, the average log-likelihood per frame."""
    with atomic_write(path) as f:
        f.write("pass\trealigned\taligned\tfailed\tlog_like_per_frame\tframes\tgaussians"
                "\tseconds\n")
        for r in records:
            f.write(f"{r.iteration}\t{int(r.realigned)}\t{r.aligned}\t{r.align_failed}\t"
                    f"{r.log_like_per_frame:.4f}\t{r.frames}\t{r.num_gauss}\t{r.seconds:.1f}\n")


def em_pass(jobs: Jobs, model: MonoModel, it: int, num_gauss: int, opts: EmOptions,
            align_opts: AlignOptions, silence: list[int],
            after_align: Callable[[int], None] | None = None) -> tuple[IterRecord, np.ndarray]:
    """(Re)align if scheduled (pass 0: equal alignment), ``after_align(it)`` (an MLLT pass),
    accumulate, update, mix up to ``num_gauss``."""
    t0 = time.time()
    jobs.call("set_model", model.am, model.trans_model)
    ali = None
    if it == 0:
        ali = sum_align(jobs.call("equal_align"))
    elif it in opts.realign_iters:
        ali = sum_align(jobs.call("realign", align_opts, False, align_am(model, opts, silence)))
    if ali is not None and ali.aligned == 0:
        raise AsrdistError(f"no training utterance could be aligned (e.g. {ali.failed[0]})")
    if after_align is not None:
        after_align(it)
    stats = GmmStats.total(jobs.call("accumulate"))
    update = estimate(model.am, model.trans_model, stats, mixup=num_gauss,
                      min_gaussian_occupancy=3.0 if it == 0 else 10.0, power=opts.power,
                      seed=(opts.seed, it))
    rec = IterRecord(it, stats.log_like / max(stats.frames, 1), stats.frames, update.num_gauss,
                     ali is not None, len(ali.failed) if ali else 0, time.time() - t0,
                     ali.aligned if ali else 0)
    log.info("iter %d: log-like/frame %.4f over %d frames, %d gaussians, %s%.1f s",
             it, rec.log_like_per_frame, rec.frames, rec.num_gauss,
             f"aligned {ali.aligned} failed {len(ali.failed)}, " if ali else "", rec.seconds)
    return rec, stats.pdf_occupancy()


def align_everything(jobs: Jobs, model: MonoModel, opts: EmOptions, silence: list[int],
                     data: DataDir) -> AlignResult:
    """As steps/align_si.sh: every utterance aligned with the final model."""
    jobs.call("set_model", model.am, model.trans_model)
    final = sum_align(jobs.call("realign", opts.align, True, align_am(model, opts, silence)))
    log.info("final alignment of all %d utterances: %d aligned, %d failed %s",
             len(data.utts), final.aligned, len(final.failed), " ".join(final.failed[:10]))
    if final.aligned == 0:
        raise AsrdistError(f"{data.path}: no utterance could be aligned")
    return final


def write_exp_dir(
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
