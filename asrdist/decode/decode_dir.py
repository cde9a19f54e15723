"""Decoding a whole data dir as Kaldi's steps/nnet3/decode.sh and local/score_sclite.sh do.

Each of the ``nj`` jobs loads the graph (once), the transition model and the acoustic scorer,
then searches each of its utterances once, to a lattice (:class:`LatticeDecoder`: latgen-
faster-mapped's), written to the job's ``lat.N.gz`` as decode.sh writes it (acoustic costs
unscaled: --post-decode-acwt 1.0). Every decoding variant is read off that lattice: the main
one (LMWT 1/acwt, no penalty: ``text``, ``ctm``) and the sweep, what ``lattice-scale
--inv-acoustic-scale=LMWT | lattice-add-penalty --word-ins-penalty=WIP | lattice-best-path``
gives (``score_LMWT_WIP/text``), with word times as ``lattice-1best | lattice-align-words-lexicon
| nbest-to-ctm`` gives them (``ctm``).
"""

from __future__ import annotations

import gzip
import os
import re
import time
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from asrdist.decode.acoustic import (
    AS_TRAINED,
    Chunking,
    GmmScorer,
    NnetScorer,
    check_model_features,
    list_utterances,
)
from asrdist.decode.decoder import check_compatible
from asrdist.decode.lattice import (
    CompactLattice,
    LatticeDecoder,
    LatticeOptions,
    load_kaldi_decoder,
    native_search,
)
from asrdist.decode.lattice.native import FlatLattice
from asrdist.decode.lattice_io import compact_lattice_binary
from asrdist.decode.lattice_readings import PathReader, frame_shift, word_aligner
from asrdist.decode.loglikes import LoglikeScorer
from asrdist.errors import AsrdistError
from asrdist.fsutil import atomic_write, naming_full_disk, write_atomically
from asrdist.jobs import LOCAL, Runner, deal
from asrdist.kaldi.final_mdl import read_am_diag_gmm
from asrdist.kaldi.gmm_feats import FeatureTransform, read_speaker_transforms
from asrdist.kaldi.transition_model import read_transition_model
from asrdist.options import POSITIVE_NUMBERS, Options, option
from asrdist.progress import progress
from asrdist.stage import Skipped, check_done

STAGE = "decode"
S5C_LMWTS = tuple(range(5, 18))  # local/score_sclite.sh's min_lmwt..max_lmwt
S5C_WIPS = (0.0, 0.5, 1.0)  # its word_ins_penalty


@dataclass(frozen=True)
class Sweep(Options):
    """The LM weights and word insertion penalties read off the lattices (score_LMWT_WIP/),
    local/score_sclite.sh's by default."""

    lmwts: tuple[float, ...] = option(
        S5C_LMWTS, "Sweep: LM weights, each read off the lattices into score_LMWT_WIP/ ('': "
                   "none).", name="lmwt", check=POSITIVE_NUMBERS)
    wips: tuple[float, ...] = option(S5C_WIPS, "Sweep: word insertion penalties.", name="wip")

    @property
    def penalties(self) -> tuple[float, ...]:
        """The penalties swept: none given ('') is the penalty 0 alone."""
        return self.wips or (0.0,)


@dataclass(frozen=True)
class Variant:
    """One reading of the lattices: the main one (name None) or a sweep point score_<name>."""

    name: str | None
    lmwt: float
    wip: float = 0.0


@dataclass(frozen=True)
class DecodeJob:
    """Everything one job needs (picklable)."""

    graph_dir: str
    trans_mdl: str
    data_dir: str
    nnet: str | None
    gmm: str | None
    opts: LatticeOptions
    variants: tuple[Variant, ...]
    threads: int
    loglikes: str | None = None  # saved scores (asrdist.decode.loglikes) instead of a model
    chunking: Chunking = AS_TRAINED  # how the network is run (nnet only)
    fmllr: str | None = None  # per-speaker transforms of a SAT GMM's features (gmm only)


@dataclass
class UttResult:
    """Hypothesis (word strings) and CTM lines per variant, and timing of one utterance."""

    texts: dict[str | None, dict[str, list[str]]]
    ctm: dict[str | None, list[str]]  # per variant
    frames: int
    seconds: float  # CPU: scoring and the lattice search
    sweep_seconds: float  # CPU: reading every variant off the lattice
    failed: list[str]
    partial: list[str]
    log: list[str]


def read_graph_dir(graph_dir: str | os.PathLike) -> tuple[Path, int | None]:
    """Check a graph dir (Kaldi's or ours) and return its path and num_pdfs when recorded."""
    graph_dir = Path(graph_dir)
    for name in ("HCLG.fst", "words.txt"):
        if not (graph_dir / name).is_file():
            raise AsrdistError(f"{graph_dir / name}: missing (run asrdist-mkgraph)")
    num_pdfs_file = graph_dir / "num_pdfs"
    return graph_dir, int(num_pdfs_file.read_text().split()[0]) if num_pdfs_file.is_file() else None


class _Worker:
    """One job's graph, lattice decoder and acoustic scorer, loaded once."""

    def __init__(self, job: DecodeJob):
        graph_dir = Path(job.graph_dir)
        self.trans = read_transition_model(job.trans_mdl)
        self.decoder = LatticeDecoder(graph_dir / "HCLG.fst", self.trans, job.opts)
        self.reader = PathReader(
            graph_dir / "words.txt",
            word_aligner(self.trans, graph_dir / "phones" / "align_lexicon.int"),
            frame_shift(job.data_dir), holder="the graph outputs for utterance {utt} (HCLG.fst "
                                              "built with another words.txt?)")
        self.scorer_name = job.loglikes or job.nnet or job.gmm
        if job.loglikes is not None:
            self.scorer = LoglikeScorer(job.loglikes)
        elif job.nnet is not None:
            import torch  # only here: importing it costs a job ~180 MiB (bench.graph_read)

            torch.set_num_threads(job.threads)
            self.scorer = NnetScorer(job.nnet, job.data_dir, job.chunking)
        else:
            transform = FeatureTransform.of_model_dir(Path(job.gmm).parent)
            if job.fmllr is not None:
                transform = transform.with_speakers(read_speaker_transforms(job.fmllr))
            self.scorer = GmmScorer(read_am_diag_gmm(job.gmm), job.data_dir, transform)
        self.variants = job.variants

    def run(self, utts: Sequence[str], lattices: str) -> Iterator[UttResult]:
        """Search each utterance once to a lattice (into the archive ``lattices``, lat.N.gz),
        then read every variant off it."""
        with naming_full_disk(lattices, "lattices"), atomic_write(lattices, "wb") as raw, \
                gzip.GzipFile("", "wb", compresslevel=6, fileobj=raw, mtime=0) as archive:
            # as `gzip -c` writes a pipe: no name, no time (the same lattices, the same bytes)
            start = time.process_time()
            for utt, scores in self.scorer.scores(list(utts)):
                result = UttResult({v.name: {} for v in self.variants},
                                   {v.name: [] for v in self.variants}, scores.shape[0], 0.0,
                                   0.0, [], [], [])
                self._check_scores(utt, scores)
                try:
                    clat = self.decoder.lattice_of(scores)  # compiled: kept flat
                except AsrdistError as e:  # latgen's "Failed to get traceback": left out
                    result.failed.append(utt)
                    result.log.append(f"WARNING: {utt}: {e}")
                    clat = None
                searched = time.process_time()
                result.seconds = searched - start
                if clat is not None:
                    archive.write(compact_lattice_binary(utt, clat))
                    self._read_variants(utt, clat, result)
                start = time.process_time()
                result.sweep_seconds = start - searched
                yield result

    def _check_scores(self, utt: str, scores: np.ndarray) -> None:
        """A frames x pdfs matrix of finite numbers, or one line naming the utterance."""
        if scores.ndim != 2 or scores.shape[0] == 0 or scores.shape[1] != self.trans.num_pdfs:
            raise AsrdistError(f"utterance {utt}: {self.scorer_name} gives scores of shape "
                               f"{scores.shape}, not frames x {self.trans.num_pdfs} pdfs")
        if not np.isfinite(scores).all():
            raise AsrdistError(f"utterance {utt}: {self.scorer_name} gives scores that hold "
                               "NaN or inf")

    def _read_variants(self, utt: str, clat: CompactLattice | FlatLattice,
                       result: UttResult) -> None:
        """Every variant's words and CTM lines, off the lattice (a point the main reading shares
        with the sweep is read once)."""
        if not self.decoder.reached_final:
            result.partial.append(utt)
            result.log.append(f"WARNING: {utt}: no final state reached, partial lattice kept")
        read = self.reader.read_points(utt, clat, [(v.lmwt, v.wip) for v in self.variants])
        for v in self.variants:
            result.texts[v.name][utt], lines = read[v.lmwt, v.wip]
            if v.name is None:
                result.log.append(f"{utt} {' '.join(result.texts[None][utt])}")
                if lines is None:
                    result.log.append(f"WARNING: {utt}: no word timings, left out of the CTM")
            result.ctm[v.name] += lines or []


@dataclass
class DecodeSummary:
    """What a decoding run did, for the log and the user."""

    utterances: int
    decoded: int
    failed: int
    partial: int
    audio_seconds: float
    wall_seconds: float
    cpu_seconds: float  # the jobs' scoring and lattice searches (CPU)
    sweep_seconds: float  # the jobs' readings of the variants off the lattices (CPU)
    variants: int

    @property
    def rtf(self) -> float:
        """Real-time factor: wall-clock decoding time over audio duration (all jobs)."""
        return self.wall_seconds / self.audio_seconds if self.audio_seconds else 0.0

    def line(self) -> str:
        per_job = self.cpu_seconds / max(self.audio_seconds, 1e-9)
        return (f"decoded {self.decoded}/{self.utterances} utterances ({self.failed} failed, "
                f"{self.partial} partial), {self.audio_seconds:.1f} s of audio in "
                f"{self.wall_seconds:.1f} s: RTF {self.rtf:.3f} (CPU per job: scoring and lattice "
                f"search {per_job:.3f}; {self.variants} readings of the lattices "
                f"{self.sweep_seconds:.2f} s)")


def _scorer_num_pdfs(nnet: str | None, gmm: str | None,
                     loglikes: str | None = None) -> tuple[int, str]:
    if loglikes is not None:
        return LoglikeScorer(loglikes).num_pdfs, loglikes
    if nnet is not None:
        from asrdist.models.final import load_final

        return load_final(nnet)[1].num_pdfs, nnet
    return read_am_diag_gmm(gmm).num_pdfs, str(gmm)


def _variants(acwt: float, lmwts: Sequence[float], wips: Sequence[float]) -> list[Variant]:
    """The main reading (LMWT 1/acwt, no penalty) and score_<LMWT>_<WIP> per sweep point."""
    for lmwt in lmwts:
        if not lmwt > 0:
            raise AsrdistError(f"--lmwt {lmwt:g}: must be positive")
    return [Variant(None, 1.0 / acwt)] + [
        Variant(f"{lmwt:g}_{wip:.1f}", lmwt, wip) for lmwt in lmwts for wip in wips]


def _remove_old_lattices(out: Path) -> None:
    """A rerun's lat.N.gz replace the last run's; none of an older, larger --nj may stay behind
    for a ``lat.*.gz`` glob (Kaldi's scoring reads them all)."""
    for old in out.glob("lat.*.gz"):
        if re.fullmatch(r"lat\.[0-9]+\.gz", old.name):
            old.unlink()


_DEFAULT_OPTIONS = LatticeOptions()  # frozen, so one shared default is safe


def decode_data_dir(
    graph_dir: str | os.PathLike,
    data_dir: str | os.PathLike,
    out_dir: str | os.PathLike,
    nnet: str | None = None,
    gmm: str | None = None,
    trans_mdl: str | None = None,
    opts: LatticeOptions = _DEFAULT_OPTIONS,
    lmwts: Sequence[float] = S5C_LMWTS,
    wips: Sequence[float] = S5C_WIPS,
    nj: int = 1,
    command: str = "",
    loglikes: str | None = None,
    chunking: Chunking = AS_TRAINED,
    runner: Runner = LOCAL,
    fmllr: str | None = None,
) -> DecodeSummary | Skipped:
    """Decode every utterance of ``data_dir`` to lattices; write lat.N.gz, num_jobs, text, ctm,
    score_<lmwt>_<wip>/{text,ctm} and log/decode.log.

    ``nnet`` (final.pt) or ``gmm`` (a GMM final.mdl) gives the acoustic scores, or
    ``loglikes`` (an scp of the scores of ``nnet``, kept by asrdist-compute-loglikes);
    ``chunking`` says how ``nnet`` runs over each utterance (asrdist.decode.acoustic); ``fmllr``
    (an archive of per-speaker transforms, asrdist-est-fmllr) adapts ``gmm``'s features. Everything
    is checked before any decoding starts: an empty test set, and a graph, transition model
    and acoustic model that do not belong together, are errors. The ``nj`` jobs are run by
    ``runner``. Returns Skipped when ``out_dir`` is done with the same options and inputs
    (asrdist.stage): the models, the whole graph and data dirs. ``nj`` and ``command`` are
    left out: they do not change the texts (the lattices are split otherwise, as Kaldi's).
    This process must not have imported kaldilm (see :func:`load_kaldi_decoder`).
    """
    load_kaldi_decoder()  # a single job decodes in this process: before the graph code
    from asrdist.decode.graph import max_ilabel

    if loglikes is not None and (nnet is not None or gmm is not None):
        raise AsrdistError("--loglikes replaces --model and --gmm: give only one of them")
    if loglikes is None and (nnet is None) == (gmm is None):
        raise AsrdistError("give exactly one of --model (final.pt) and --gmm (final.mdl)")
    if nj < 1:
        raise AsrdistError(f"--nj {nj}: must be at least 1")
    variants = _variants(opts.acwt, lmwts, wips)
    options = {**asdict(opts), "search": native_search(),  # both change the lattices
               "lmwts": list(lmwts), "wips": list(wips),
               "scorer": "nnet" if nnet is not None else "gmm" if gmm else "loglikes"}
    if nnet is not None:
        options["chunking"] = asdict(chunking)
    elif chunking != AS_TRAINED:
        raise AsrdistError("--frames-per-chunk and --extra-left/right-context say how a "
                           "--model network is run; the scores of --gmm and --loglikes take none")
    if fmllr is not None and gmm is None:
        raise AsrdistError("--fmllr adapts the features of a --gmm system: give --gmm")
    kept = str(Path(loglikes).parent) if loglikes else None  # its ark too: rewritten in place
    transform = Path(gmm).parent / "final.mat" if gmm else None  # an LDA+MLLT GMM's features
    check = check_done(out_dir, STAGE, options,  # the paths: in the inputs
                       [p for p in (nnet, gmm, trans_mdl, kept, fmllr) if p] + [graph_dir, data_dir]
                       + ([transform] if transform and transform.is_file() else []))
    if check.done:
        return check.skipped()
    if nnet is not None:  # first: a model given features of another kind or rate
        check_model_features(nnet, data_dir)
    graph, graph_num_pdfs = read_graph_dir(graph_dir)
    utts = list_utterances(data_dir)
    trans_path = Path(gmm if gmm is not None else (trans_mdl or graph / "final.mdl"))
    if not trans_path.is_file():
        raise AsrdistError(f"{trans_path}: missing; pass the model's final.mdl with --trans-mdl")
    trans = read_transition_model(trans_path)
    num_pdfs, model_name = _scorer_num_pdfs(nnet, gmm, loglikes)
    check_compatible(max_ilabel(graph / "HCLG.fst"), graph_num_pdfs, trans,
                     num_pdfs, {"graph": str(graph), "trans": str(trans_path), "model": model_name})

    parts = deal(utts, nj)  # outputs are sorted below; dealt, the jobs finish together
    job = DecodeJob(str(graph), str(trans_path), str(data_dir), nnet, gmm, opts,
                    tuple(variants), threads=1 if len(parts) > 1 else max(1, os.cpu_count() or 1),
                    loglikes=loglikes, chunking=chunking, fmllr=fmllr)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    _remove_old_lattices(out)
    start = time.perf_counter()
    with progress(len(utts), "decode", "utt") as bar, \
            runner.start("decode", _Worker, [(job,)] * len(parts)) as jobs:
        results = [r for part in jobs.call_each(
            "run", [(p, str(out / f"lat.{n}.gz")) for n, p in enumerate(parts, 1)], bar)
            for r in part]
    wall = time.perf_counter() - start

    summary = DecodeSummary(
        len(utts), sum(len(r.texts[None]) for r in results), sum(len(r.failed) for r in results),
        sum(len(r.partial) for r in results),
        frame_shift(data_dir) * sum(r.frames for r in results), wall,
        sum(r.seconds for r in results), sum(r.sweep_seconds for r in results), len(variants))
    _write(out / "num_jobs", f"{len(parts)}\n", "number of jobs")
    for v in variants:
        texts = {u: w for r in results for u, w in r.texts[v.name].items()}
        path = out / "text" if v.name is None else out / f"score_{v.name}" / "text"
        _write(path, "".join(f"{u} {' '.join(texts[u])}".rstrip() + "\n"
                             for u in sorted(texts, key=str.encode)), "hypotheses")
        ctm = sorted((line for r in results for line in r.ctm[v.name]),
                     key=lambda line: (line.split()[0].encode(), float(line.split()[2])))
        _write(out / ("ctm" if v.name is None else f"score_{v.name}/ctm"),
               "".join(line + "\n" for line in ctm), "CTM")
    _write(out / "words.txt", (graph / "words.txt").read_bytes(), "graph's words.txt")
    if (graph / "log" / "mkgraph.log").is_file():  # so the report can show how the graph was made
        _write(out / "log" / "mkgraph.log", (graph / "log" / "mkgraph.log").read_bytes(),
               "graph's log")
    log = [f"# {command}\n" if command else "# asrdist-decode\n"]
    log += [line + "\n" for r in results for line in r.log]
    _write(out / "log" / "decode.log", "".join(log) + summary.line() + "\n", "decoding log")
    check.mark_done()
    return summary


def _write(path: Path, data: str | bytes, what: str) -> None:
    """Write an output atomically; a full disk is one line naming the file, not a bare
    "No space left on device"."""
    raw = data.encode("utf-8") if isinstance(data, str) else data
    write_atomically(path, lambda f: f.write(raw), what)
