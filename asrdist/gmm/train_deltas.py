"""A tied-triphone GMM-HMM on deltas (Kaldi's steps/train_deltas.sh: tri1) over kaldi-hmm-gmm.

From the previous system's alignment dir (the monophone's): tree statistics on every aligned
frame (acc-tree-stats, silence context-independent), questions by clustering the phones
(cluster-phones), the tree (build-tree --max-leaves), one Gaussian per leaf (gmm-init-model),
the alignments converted to the new tree (convert-ali), training graphs with triphone context,
then train_deltas.sh's EM schedule: passes 1 .. num_iters-1, realigning on ``realign_iters``,
mixing up by a fixed increment to ``total_gauss`` until ``max_iter_inc``. Every utterance is
then aligned with the final model and the exp dir written as a Kaldi alignment dir (tree,
final.mdl, ali.N.gz, questions.int, ...), which asrdist-ingest-ali and Kaldi's tools read.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import reduce
from pathlib import Path
from typing import NamedTuple

import kaldi_hmm_gmm as khg  # before kaldifst, which the gmm modules load
import numpy as np

from asrdist.errors import AsrdistError
from asrdist.fsutil import atomic_write
from asrdist.gmm.align_job import AlignJob
from asrdist.gmm.build_tree import TreeOptions, TreeSummary, build_tree, read_roots
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
from asrdist.gmm.model import MonoModel
from asrdist.gmm.questions import cluster_phones, compile_questions
from asrdist.gmm.tied_model import AlignmentConverter, init_tied_gmms
from asrdist.gmm.tree_stats import TreeStats, accumulate_tree_stats
from asrdist.hmm.ali_dir import alignment_inputs, read_ali_dir
from asrdist.hmm.event_map import EventMap, to_context_dependency
from asrdist.hmm.phone_ali import TransitionTable
from asrdist.jobs import LOCAL, Jobs, Runner, split
from asrdist.kaldi.data_dir import DataDir
from asrdist.kaldi.gmm_feats import DELTAS, GMM_TABLES, FeatureTransform, load_features
from asrdist.kaldi.lang import Lang
from asrdist.kaldi.transition_model import (
    TransitionInfo,
    read_transition_model,
    transition_info_from_khg,
)
from asrdist.progress import progress
from asrdist.stage import Skipped, StageCheck, check_done

log = logging.getLogger(__name__)

STAGE = "train_deltas"
WIDTH, CENTRAL = 3, 1  # triphones


@dataclass
class DeltasOptions(EmOptions):
    """train_deltas.sh's options and defaults (its ``numleaves`` and ``totgauss`` too)."""

    num_leaves: int = 2000
    num_iters: int = 35
    max_iter_inc: int | None = 25
    total_gauss: int = 10000
    realign_iters: tuple[int, ...] = (10, 20, 30)
    split_thresh: float = 300.0  # build-tree --thresh
    cluster_thresh: float = -1.0  # build-tree --cluster-thresh: -1, the smallest split


@dataclass
class DeltasSummary:
    """What the run measured."""

    tree: TreeSummary
    iters: list[IterRecord]
    num_utts: int
    aligned: int
    failed: list[str]
    seconds: float


def tree_stats_job(data_dir: Path, alis: dict[str, np.ndarray], table: TransitionTable,
                   ci_phones: set[int], transform: FeatureTransform = DELTAS) -> TreeStats:
    """acc-tree-stats over one split of the data (a job of its own)."""
    data = DataDir.load(data_dir, GMM_TABLES)
    feats = load_features(data, list(alis), transform)
    for u, ali in alis.items():
        if feats[u].shape[0] != len(ali):
            raise AsrdistError(f"utterance {u}: {len(ali)} aligned frames but "
                               f"{feats[u].shape[0]} feature frames")
    return accumulate_tree_stats(table, ((u, feats[u], a) for u, a in alis.items()),
                                 ci_phones, WIDTH, CENTRAL)


def _read_int_lines(path: Path) -> list[list[int]]:
    if not path.is_file():
        return []
    try:
        return [[int(x) for x in line.split()] for line in path.read_text().splitlines()
                if line.strip()]
    except ValueError as e:
        raise AsrdistError(f"{path}: not integer lines ({e})") from e


def tree_stats(runner: Runner, data: DataDir, lang: Lang, old: TransitionInfo,
               alis: dict[str, np.ndarray], nj: int,
               transform: FeatureTransform = DELTAS) -> TreeStats:
    """acc-tree-stats in ``nj`` jobs and sum-tree-stats of their parts."""
    return reduce(lambda a, b: a + b, runner.map("tree-stats", tree_stats_job, [
        (data.path, {u: alis[u] for u in part}, TransitionTable.of(old),
         context_independent(lang), transform) for part in split(sorted(alis), nj)]))


def context_independent(lang: Lang) -> set[int]:
    path = lang.path / "phones" / "context_indep.csl"
    try:
        return {int(x) for x in path.read_text().strip().split(":") if x}
    except (OSError, ValueError) as e:
        raise AsrdistError(f"{path}: unreadable ({e}); needed for tree statistics") from e


def make_tree(stats: TreeStats, lang: Lang, opts: DeltasOptions,
              exp_dir: Path) -> tuple[EventMap, TreeSummary]:
    """cluster-phones, compile-questions and build-tree; questions.int written as Kaldi's."""
    questions = cluster_phones(stats, lang.phone_sets)
    questions += _read_int_lines(lang.path / "phones" / "extra_questions.int")
    with atomic_write(exp_dir / "questions.int") as f:
        f.writelines(" ".join(map(str, q)) + "\n" for q in questions)
    pdf_classes = lang.topology().get_phone_to_num_pdf_classes()
    compiled = compile_questions(questions, max(pdf_classes), WIDTH)
    tree, summary = build_tree(
        stats, read_roots(lang.path / "phones" / "roots.int"), compiled,
        dict(enumerate(pdf_classes)),
        TreeOptions(max_leaves=opts.num_leaves, thresh=opts.split_thresh,
                    cluster_thresh=opts.cluster_thresh, width=WIDTH, central=CENTRAL))
    log.info("tree: %d stub leaves, %d splits (%.3f per frame over %.0f frames), %d leaves "
             "tied away, %d leaves", summary.stub_leaves, summary.splits,
             summary.split_gain_per_frame, summary.frames, summary.clustered_away,
             summary.leaves)
    return tree, summary


class Begun(NamedTuple):
    """A triphone stage that is not done: its check, inputs and the alignments it reads."""

    check: StageCheck
    data: DataDir
    lang: Lang
    old: TransitionInfo
    alis: dict[str, np.ndarray]


def begin(stage: str, data_dir: Path, lang_dir: Path, ali_dir: Path, exp_dir: Path,
          opts: DeltasOptions) -> Begun | Skipped:
    """What both triphone trainers do first: skip a done exp dir, read and check the data,
    lang and alignments, and clear the old outputs (``nj`` only splits work: not compared)."""
    ali_dir = Path(ali_dir)
    options = opts.identity()
    check = check_done(exp_dir, stage, options, [data_dir, lang_dir, *alignment_inputs(ali_dir)])
    if check.done:
        return check.skipped()
    data, lang = DataDir.load(data_dir, GMM_TABLES), Lang.load(Path(lang_dir))
    check_transcripts(data, lang, opts.map_oov)
    old = read_transition_model(ali_dir / "final.mdl")
    alis = {u: a for u, a in read_ali_dir(ali_dir).items() if u in set(data.utts)}
    if not alis:
        raise AsrdistError(f"{ali_dir}: no alignments of utterances in {data.path}")
    exp_dir.mkdir(parents=True, exist_ok=True)
    clear_outputs(exp_dir)
    return Begun(check, data, lang, old, alis)


def train_deltas(
    data_dir: Path, lang_dir: Path, ali_dir: Path, exp_dir: Path,
    opts: DeltasOptions | None = None, runner: Runner = LOCAL,
) -> DeltasSummary | Skipped:
    """Train a tied-triphone system from ``ali_dir``'s alignments and write ``exp_dir``;
    Skipped when it is done with the same options and inputs (``nj`` only splits work)."""
    opts = opts or DeltasOptions()
    exp_dir = Path(exp_dir)
    begun = begin(STAGE, data_dir, lang_dir, ali_dir, exp_dir, opts)
    if isinstance(begun, Skipped):
        return begun
    check, data, lang, old, alis = begun
    start = time.time()
    with log_to(exp_dir / "log" / "train_deltas.log"):
        stats = tree_stats(runner, data, lang, old, alis, opts.nj)
        model, converted, tree_summary = tied_system(stats, lang, opts, exp_dir, old, alis)
        parts = split(data.utts, opts.nj)
        with runner.start("align", AlignJob, [
                (data.path, lang.path, part, sorted(alis), model.tree, model.trans_model,
                 opts.map_oov) for part in parts]) as jobs:
            final = train_and_align(jobs, parts, converted, model, opts, lang, data, exp_dir)
        summary = DeltasSummary(tree_summary, final.iters, len(data.utts), final.aligned,
                                final.failed, time.time() - start)
        log.info("done in %.1f s", summary.seconds)
    check.mark_done()
    return summary


def tied_system(stats: TreeStats, lang: Lang, opts: DeltasOptions, exp_dir: Path,
                old: TransitionInfo, alis: dict[str, np.ndarray],
                ) -> tuple[MonoModel, dict[str, np.ndarray], TreeSummary]:
    """The tree, its first model (one Gaussian per leaf) and the old alignments converted."""
    tree, tree_summary = make_tree(stats, lang, opts, exp_dir)
    ctx_dep = to_context_dependency(tree, WIDTH, CENTRAL)
    topo = lang.topology()
    model = MonoModel(topo, ctx_dep, khg.TransitionModel(ctx_dep=ctx_dep, hmm_topo=topo),
                      init_tied_gmms(stats, tree, ctx_dep.num_pdfs)[0])
    converter = AlignmentConverter(old, transition_info_from_khg(model.trans_model), ctx_dep)
    converted = {u: converter.convert(u, a) for u, a in alis.items()}
    log.info("%d pdfs; alignments converted", ctx_dep.num_pdfs)
    return model, converted, tree_summary


@dataclass
class TrainedAlignment:
    """The EM passes' records and the final alignment's outcome."""

    iters: list[IterRecord]
    aligned: int
    failed: list[str]


def train_and_align(jobs: Jobs, parts: list[list[str]], converted: dict[str, np.ndarray],
                    model: MonoModel, opts: DeltasOptions, lang: Lang, data: DataDir,
                    exp_dir: Path, after_align: Callable[[int], None] | None = None,
                    ) -> TrainedAlignment:
    """Start the jobs from the converted alignments, run the EM passes, align everything and
    write the exp dir."""
    jobs.call_each("set_alignments",
                   [({u: converted[u] for u in part if u in converted},) for part in parts])
    silence = optional_silence(lang) if opts.boost_silence != 1.0 else []
    records, occs = _em(jobs, model, opts, silence, after_align)
    write_passes(exp_dir / "log" / "passes.tsv", records)
    final = align_everything(jobs, model, opts, silence, data)
    write_exp_dir(exp_dir, lang, jobs, model, occs)
    return TrainedAlignment(records, final.aligned, final.failed)


def _em(jobs: Jobs, model: MonoModel, opts: DeltasOptions, silence: list[int],
        after_align: Callable[[int], None] | None) -> tuple[list[IterRecord], np.ndarray]:
    """train_deltas.sh's passes 1 .. num_iters-1, starting at one Gaussian per leaf."""
    records: list[IterRecord] = []
    num_gauss = opts.num_leaves
    inc = max((opts.total_gauss - num_gauss) // max(opts.last_inc_iter(), 1), 0)
    occs = np.zeros(model.am.num_pdfs, dtype=np.float32)
    with progress(opts.num_iters - 1, "tri", "iter") as bar:
        for it in range(1, opts.num_iters):
            rec, occs = em_pass(jobs, model, it, num_gauss, opts, opts.align, silence,
                                after_align)
            records.append(rec)
            if it <= opts.last_inc_iter():
                num_gauss += inc
            bar.update()
    return records, occs
