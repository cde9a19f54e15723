"""Decoding a whole data dir: ``nj`` jobs, hypothesis texts, CTM, log and RTF summary.

Each job loads the graph, the transition model and the acoustic scorer once, scores each of
its utterances once and searches it with every decoding variant (the main setting and the
score_<lmwt>_<wip> sweep points). A job reads the graph once, whatever the number of insertion
penalties (:mod:`asrdist.decode.word_penalty`): it scores a batch of utterances (up to
SCORE_BUFFER bytes of scores), then searches the batch with every variant of one penalty
before it moves to the next (which rewrites the costs of the word arcs without input, if any).
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from asrdist.decode.acoustic import AS_TRAINED, Chunking, GmmScorer, NnetScorer, list_utterances
from asrdist.decode.decoder import (
    DecodeOptions,
    Decoder,
    Hypothesis,
    check_compatible,
)
from asrdist.decode.graph import max_ilabel, read_fst
from asrdist.decode.loglikes import LoglikeScorer
from asrdist.decode.word_align import WordAligner
from asrdist.decode.word_penalty import PenaltyGraph
from asrdist.errors import AsrdistError
from asrdist.fsutil import write_atomically
from asrdist.jobs import LOCAL, Runner, deal
from asrdist.kaldi.data_dir import read_symbols
from asrdist.kaldi.final_mdl import read_am_diag_gmm
from asrdist.kaldi.transition_model import read_transition_model
from asrdist.progress import progress
from asrdist.stage import Skipped, check_done

STAGE = "decode"
SCORE_BUFFER = 256 << 20  # bytes of scores a job keeps to search them under every penalty


@dataclass(frozen=True)
class Variant:
    """One decoding setting: the main one (name None) or a sweep point score_<name>."""

    name: str | None
    acwt: float
    wip: float = 0.0


@dataclass(frozen=True)
class DecodeJob:
    """Everything one job needs (picklable)."""

    graph_dir: str
    trans_mdl: str
    data_dir: str
    nnet: str | None
    gmm: str | None
    opts: DecodeOptions
    variants: tuple[Variant, ...]
    threads: int
    loglikes: str | None = None  # saved scores (asrdist.decode.loglikes) instead of a model
    chunking: Chunking = AS_TRAINED  # how the network is run (nnet only)


@dataclass
class UttResult:
    """Hypothesis (word strings) and CTM lines per variant, and timing of one utterance."""

    texts: dict[str | None, dict[str, list[str]]]
    ctm: dict[str | None, list[str]]  # per variant
    frames: int
    seconds: float
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


def frame_shift(data_dir: str | os.PathLike) -> float:
    """Seconds per frame: the data dir's ``frame_shift`` file, else Kaldi's 10 ms."""
    shift_file = Path(data_dir) / "frame_shift"
    return float(shift_file.read_text().split()[0]) if shift_file.is_file() else 0.01


class _Worker:
    """One job's graph, decoders and acoustic scorer, loaded once."""

    def __init__(self, job: DecodeJob):
        import torch

        torch.set_num_threads(job.threads)
        graph_dir = Path(job.graph_dir)
        self.trans = read_transition_model(job.trans_mdl)
        self.words_txt = graph_dir / "words.txt"
        words = read_symbols(self.words_txt)
        self.id2word = {i: w for w, i in words.items()}
        real = [i for w, i in words.items()
                if i > 0 and not w.startswith("#") and w not in ("<s>", "</s>")]
        self.opts = job.opts
        self.wips = sorted({v.wip for v in job.variants})
        self.penalties = None
        if self.wips == [0.0]:
            self.graph, trans = read_fst(graph_dir / "HCLG.fst"), self.trans
        else:
            self.penalties = PenaltyGraph(graph_dir / "HCLG.fst", real, self.trans)
            self.graph, trans = self.penalties.fst, self.penalties.trans
        self.decoders = {acwt: Decoder(self.graph, trans, DecodeOptions(
            acwt, self.opts.beam, self.opts.max_active, self.opts.min_active))
            for acwt in sorted({v.acwt for v in job.variants})}
        lexicon = graph_dir / "phones" / "align_lexicon.int"
        self.aligner = None
        if lexicon.is_file():
            rows = [[int(x) for x in line.split()] for line in lexicon.read_text().splitlines()]
            self.aligner = WordAligner(self.trans, rows)
        self.shift = frame_shift(job.data_dir)
        if job.loglikes is not None:
            self.scorer = LoglikeScorer(job.loglikes)
        elif job.nnet is not None:
            self.scorer = NnetScorer(job.nnet, job.data_dir, job.chunking)
        else:
            self.scorer = GmmScorer(read_am_diag_gmm(job.gmm), job.data_dir)
        self.variants = job.variants

    def _search(self, wip: float, batch: list[tuple[str, np.ndarray]],
                hyps: dict[str, dict[tuple[float, float], Hypothesis | None]]) -> None:
        """Search every utterance of ``batch`` with every variant of penalty ``wip``."""
        if self.penalties is not None:
            self.penalties.set_penalty(wip)
        for utt, scores in batch:
            for acwt in sorted({v.acwt for v in self.variants if v.wip == wip}):
                if self.penalties is None:
                    hyps[utt][acwt, wip] = self.decoders[acwt].decode(scores)
                    continue
                hyp = self.decoders[acwt].decode(self.penalties.scores(scores, acwt))
                if hyp is not None:
                    hyp.alignment = self.penalties.alignment(hyp.alignment)
                hyps[utt][acwt, wip] = hyp

    def _batches(self, utts: Sequence[str]) -> Iterator[list[tuple[str, np.ndarray]]]:
        """Scored utterances, one at a time under one penalty, else up to SCORE_BUFFER bytes."""
        batch, size = [], 0
        for utt, scores in self.scorer.scores(list(utts)):
            batch.append((utt, scores))
            size += scores.nbytes
            if len(self.wips) == 1 or size >= SCORE_BUFFER:
                yield batch
                batch, size = [], 0
        if batch:
            yield batch

    def _words(self, utt: str, ids: Sequence[int]) -> list[str]:
        """The words of a path's word ids; an id words.txt lacks (the graph was built with
        another words.txt) is an error naming it, as Kaldi's int2sym.pl refuses one."""
        try:
            return [self.id2word[w] for w in ids]
        except KeyError as e:
            raise AsrdistError(f"{self.words_txt}: no word has id {e.args[0]}, which the graph "
                               f"outputs for utterance {utt} (HCLG.fst built with another "
                               "words.txt?)") from None

    def run(self, utts: Sequence[str]) -> Iterator[UttResult]:
        """Score each utterance once, then search it with every variant, penalty by penalty."""
        start = time.perf_counter()
        for batch in self._batches(utts):
            hyps: dict[str, dict[tuple[float, float], Hypothesis | None]] = {
                utt: {} for utt, _ in batch}
            for wip in self.wips:
                self._search(wip, batch, hyps)
            now = time.perf_counter()
            frames = sum(scores.shape[0] for _, scores in batch)
            for utt, scores in batch:
                result = UttResult({v.name: {} for v in self.variants},
                                   {v.name: [] for v in self.variants}, scores.shape[0],
                                   (now - start) * scores.shape[0] / max(frames, 1), [], [], [])
                for v in self.variants:
                    hyp = hyps[utt][v.acwt, v.wip]
                    if hyp is None:
                        if v.name is None:
                            result.failed.append(utt)
                            result.log.append(f"WARNING: {utt}: no path survived the beam")
                        continue
                    result.texts[v.name][utt] = self._words(utt, hyp.words)
                    if v.name is None:
                        self._main_outputs(utt, hyp, scores.shape[0], result)
                    else:
                        result.ctm[v.name] += self._ctm(utt, hyp) or []
                yield result
            start = now

    def _main_outputs(self, utt: str, hyp: Hypothesis, frames: int, result: UttResult) -> None:
        if not hyp.reached_final:
            result.partial.append(utt)
            result.log.append(f"WARNING: {utt}: no final state reached, partial path used")
        result.log.append(f"{utt} {' '.join(self._words(utt, hyp.words))}  "
                          f"(cost {hyp.cost:.2f}, {frames} frames)")
        lines = self._ctm(utt, hyp)
        if lines is None:
            result.log.append(f"WARNING: {utt}: no word timings, left out of the CTM")
            return
        result.ctm[None] += lines

    def _ctm(self, utt: str, hyp: Hypothesis) -> list[str] | None:
        """CTM lines (times relative to the utterance); None without word timings."""
        timed = self.aligner.align(hyp.alignment, hyp.words) if self.aligner else None
        if timed is None:
            return None
        words = self._words(utt, [w for w, _, _ in timed])
        return [f"{utt} 1 {s * self.shift:.2f} {d * self.shift:.2f} {word}"
                for word, (_, s, d) in zip(words, timed, strict=True)]


@dataclass
class DecodeSummary:
    """What a decoding run did, for the log and the user."""

    utterances: int
    decoded: int
    failed: int
    partial: int
    audio_seconds: float
    wall_seconds: float
    cpu_seconds: float

    @property
    def rtf(self) -> float:
        """Real-time factor: wall-clock decoding time over audio duration (all jobs)."""
        return self.wall_seconds / self.audio_seconds if self.audio_seconds else 0.0

    def line(self) -> str:
        return (f"decoded {self.decoded}/{self.utterances} utterances ({self.failed} failed, "
                f"{self.partial} partial), {self.audio_seconds:.1f} s of audio in "
                f"{self.wall_seconds:.1f} s: RTF {self.rtf:.3f} "
                f"(per job {self.cpu_seconds / max(self.audio_seconds, 1e-9):.3f})")


def _scorer_num_pdfs(nnet: str | None, gmm: str | None,
                     loglikes: str | None = None) -> tuple[int, str]:
    if loglikes is not None:
        return LoglikeScorer(loglikes).num_pdfs, loglikes
    if nnet is not None:
        from asrdist.models.final import load_final

        return load_final(nnet)[1].num_pdfs, nnet
    return read_am_diag_gmm(gmm).num_pdfs, str(gmm)


_DEFAULT_OPTIONS = DecodeOptions()  # frozen, so one shared default is safe


def decode_data_dir(
    graph_dir: str | os.PathLike,
    data_dir: str | os.PathLike,
    out_dir: str | os.PathLike,
    nnet: str | None = None,
    gmm: str | None = None,
    trans_mdl: str | None = None,
    opts: DecodeOptions = _DEFAULT_OPTIONS,
    lmwts: Sequence[float] = (),
    wips: Sequence[float] = (0.0,),
    nj: int = 1,
    command: str = "",
    loglikes: str | None = None,
    chunking: Chunking = AS_TRAINED,
    runner: Runner = LOCAL,
) -> DecodeSummary | Skipped:
    """Decode every utterance of ``data_dir``; write text, ctm, score_<lmwt>_<wip>/text, log.

    ``nnet`` (final.pt) or ``gmm`` (a GMM final.mdl) gives the acoustic scores, or
    ``loglikes`` (an scp of the scores of ``nnet``, kept by asrdist-compute-loglikes);
    ``chunking`` says how ``nnet`` runs over each utterance (asrdist.decode.acoustic). Everything
    is checked before any decoding starts: an empty test set, and a graph, transition model
    and acoustic model that do not belong together, are errors. The ``nj`` jobs are run by
    ``runner``. Returns Skipped when ``out_dir`` is done with the same options and inputs
    (asrdist.stage): the models, the whole graph and data dirs. ``nj`` and ``command`` are
    left out: they do not change the output.
    """
    if loglikes is not None and (nnet is not None or gmm is not None):
        raise AsrdistError("--loglikes replaces --model and --gmm: give only one of them")
    if loglikes is None and (nnet is None) == (gmm is None):
        raise AsrdistError("give exactly one of --model (final.pt) and --gmm (final.mdl)")
    if nj < 1:
        raise AsrdistError(f"--nj {nj}: must be at least 1")
    options = {"acwt": opts.acwt, "beam": opts.beam, "max_active": opts.max_active,
               "min_active": opts.min_active, "lmwts": list(lmwts), "wips": list(wips),
               "scorer": "nnet" if nnet is not None else "gmm" if gmm else "loglikes"}
    if nnet is not None:
        options["chunking"] = asdict(chunking)
    elif chunking != AS_TRAINED:
        raise AsrdistError("--frames-per-chunk and --extra-left/right-context say how a "
                           "--model network is run; the scores of --gmm and --loglikes take none")
    kept = str(Path(loglikes).parent) if loglikes else None  # its ark too: rewritten in place
    check = check_done(out_dir, STAGE, options,  # the paths: in the inputs
                       [p for p in (nnet, gmm, trans_mdl, kept) if p] + [graph_dir, data_dir])
    if check.done:
        return check.skipped()
    graph, graph_num_pdfs = read_graph_dir(graph_dir)
    utts = list_utterances(data_dir)
    trans_path = Path(gmm if gmm is not None else (trans_mdl or graph / "final.mdl"))
    if not trans_path.is_file():
        raise AsrdistError(f"{trans_path}: missing; pass the model's final.mdl with --trans-mdl")
    trans = read_transition_model(trans_path)
    num_pdfs, model_name = _scorer_num_pdfs(nnet, gmm, loglikes)
    check_compatible(max_ilabel(graph / "HCLG.fst"), graph_num_pdfs, trans,
                     num_pdfs, {"graph": str(graph), "trans": str(trans_path), "model": model_name})

    variants = [Variant(None, opts.acwt)]
    variants += [Variant(f"{lmwt:g}_{wip:.1f}", 1.0 / lmwt, wip) for lmwt in lmwts for wip in wips]
    parts = deal(utts, nj)  # outputs are sorted below; dealt, the jobs finish together
    job = DecodeJob(str(graph), str(trans_path), str(data_dir), nnet, gmm, opts,
                    tuple(variants), threads=1 if len(parts) > 1 else max(1, os.cpu_count() or 1),
                    loglikes=loglikes, chunking=chunking)
    out = Path(out_dir)
    start = time.perf_counter()
    with progress(len(utts), "decode", "utt") as bar, \
            runner.start("decode", _Worker, [(job,)] * len(parts)) as jobs:
        results = [r for part in jobs.call_each("run", [(p,) for p in parts], bar) for r in part]
    wall = time.perf_counter() - start

    summary = DecodeSummary(
        len(utts), sum(len(r.texts[None]) for r in results), sum(len(r.failed) for r in results),
        sum(len(r.partial) for r in results),
        frame_shift(data_dir) * sum(r.frames for r in results), wall,
        sum(r.seconds for r in results))
    for v in variants:
        texts = {u: w for r in results for u, w in r.texts[v.name].items()}
        path = out / "text" if v.name is None else out / f"score_{v.name}" / "text"
        _write(path, "".join(f"{u} {' '.join(texts[u])}".rstrip() + "\n"
                             for u in sorted(texts, key=str.encode)), "hypotheses")
    for v in variants:
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
