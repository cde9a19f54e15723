"""One split of the training data (a Kaldi JOB), run in-process or in its own process.

A job owns its utterances' features, training graphs and current alignments for the whole
training run, so graphs are compiled once; per EM pass the parent sends the model (khg models
pickle) and gets numpy statistics back.
"""

from __future__ import annotations

import multiprocessing as mp
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import kaldi_hmm_gmm as khg
import numpy as np

from asrdist.gmm.align import (
    AlignOptions,
    equal_alignment,
    gmm_decodable,
    viterbi_alignment,
)
from asrdist.gmm.feats import GMM_TABLES, load_features
from asrdist.gmm.graphs import GraphCompiler
from asrdist.gmm.stats import GmmStats, accumulate
from asrdist.kaldi.am_gmm import am_params_from_khg
from asrdist.kaldi.data_dir import DataDir
from asrdist.kaldi.lang import Lang


@dataclass
class AlignResult:
    """Outcome of aligning a job's utterances."""

    aligned: int
    failed: list[str]
    log_like: float  # Viterbi path score (acoustic scale 1), summed over aligned utterances
    frames: int


class AlignJob:
    """Features, graphs and alignments of one data split."""

    def __init__(
        self,
        data_dir: Path,
        lang_dir: Path,
        utts: list[str],
        train_utts: list[str],
        tree: khg.ContextDependency,
        trans_model: khg.TransitionModel,
        map_oov: bool,
    ):
        data, lang = DataDir.load(data_dir, GMM_TABLES), Lang.load(lang_dir)
        self.utts = utts
        train_set = set(train_utts)
        self.train_utts = [u for u in utts if u in train_set]
        self.feats = load_features(data, utts)
        compiler = GraphCompiler(lang, tree, trans_model)
        self.graphs = {u: compiler.compile(lang.word_ids(u, data.text[u], map_oov)) for u in utts}
        self.alis: dict[str, np.ndarray] = {}
        self.trans_model = trans_model
        self.am: khg.AmDiagGmm | None = None

    def set_model(self, am: khg.AmDiagGmm, trans_model: khg.TransitionModel) -> None:
        self.am, self.trans_model = am, trans_model

    def equal_align(self) -> AlignResult:
        """Flat start: every training utterance split evenly over a random graph path."""
        self.alis, failed = {}, []
        for u in self.train_utts:
            ali = equal_alignment(self.graphs[u], self.feats[u].shape[0], u)
            if ali is None:
                failed.append(u)
            else:
                self.alis[u] = ali
        frames = sum(self.feats[u].shape[0] for u in self.alis)
        return AlignResult(len(self.alis), failed, 0.0, frames)

    def realign(self, opts: AlignOptions, everything: bool = False,
                am: khg.AmDiagGmm | None = None) -> AlignResult:
        """Viterbi-realign the training utterances (or all, for the output alignments) with
        ``am`` (a silence-boosted copy) or the current model.

        An utterance that fails drops out of this pass's statistics, as in Kaldi.
        """
        assert self.am is not None, "set_model first"
        self.alis, failed, like = {}, [], 0.0
        am = am if am is not None else self.am
        for u in self.utts if everything else self.train_utts:
            feats = self.feats[u]
            decodable = gmm_decodable(am, self.trans_model, feats, opts)
            res = viterbi_alignment(self.graphs[u], decodable, feats.shape[0], self.trans_model,
                                    u, opts)
            if res is None:
                failed.append(u)
            else:
                self.alis[u], utt_like = res
                like += utt_like
        frames = sum(self.feats[u].shape[0] for u in self.alis)
        return AlignResult(len(self.alis), failed, like, frames)

    def accumulate(self) -> GmmStats:
        """gmm-acc-stats-ali over the current alignments."""
        assert self.am is not None, "set_model first"
        params = am_params_from_khg(self.am)
        stats = GmmStats.zeros(params, self.trans_model.num_transition_ids)
        if self.alis:
            tid2pdf = np.asarray(self.trans_model.transition_id_to_pdf_array(), dtype=np.int64)
            tids = np.concatenate(list(self.alis.values()))
            feats = np.concatenate([self.feats[u] for u in self.alis])
            accumulate(stats, params, feats, tid2pdf[tids], tids)
        return stats

    def alignments(self) -> list[tuple[str, np.ndarray]]:
        return [(u, self.alis[u]) for u in self.utts if u in self.alis]


def _serve(conn, args: tuple) -> None:
    """Child process: build the job, then run the parent's method calls until told to stop."""
    try:
        job = AlignJob(*args)
        conn.send(("ok", None))
    except BaseException as e:  # noqa: BLE001 - every failure goes back to the parent
        conn.send(("error", (e, traceback.format_exc())))
        return
    while True:
        msg = conn.recv()
        if msg is None:
            return
        method, call_args = msg
        try:
            conn.send(("ok", getattr(job, method)(*call_args)))
        except BaseException as e:  # noqa: BLE001
            conn.send(("error", (e, traceback.format_exc())))


class RemoteJob:
    """An AlignJob in a child process; ``submit`` then ``result`` so jobs run in parallel."""

    def __init__(self, *args: Any):
        ctx = mp.get_context("spawn")
        self._conn, child = ctx.Pipe()
        self._proc = ctx.Process(target=_serve, args=(child, args), daemon=True)
        self._proc.start()
        child.close()  # the first result() is the constructor's reply

    def submit(self, method: str, *args: Any) -> None:
        self._conn.send((method, args))

    def result(self) -> Any:
        try:
            status, value = self._conn.recv()
        except EOFError:
            raise RuntimeError(f"alignment job process {self._proc.pid} died") from None
        if status == "error":
            exc, tb = value
            raise exc from RuntimeError(f"in job process {self._proc.pid}:\n{tb}")
        return value

    def close(self) -> None:
        if self._proc.is_alive():
            try:
                self._conn.send(None)
            except OSError:
                pass
        self._proc.join(timeout=10)
        if self._proc.is_alive():
            self._proc.kill()
            self._proc.join()


class LocalJob:
    """Same interface as RemoteJob, run in this process (--nj 1: no process overhead)."""

    def __init__(self, *args: Any):
        self._job = AlignJob(*args)
        self._value: Any = None

    def submit(self, method: str, *args: Any) -> None:
        self._value = getattr(self._job, method)(*args)

    def result(self) -> Any:
        return self._value

    def close(self) -> None:
        pass


def split_parts(items: list, nj: int) -> list[list]:
    """Contiguous, near-equal parts, as utils/split_data.sh --per-utt."""
    bounds = np.linspace(0, len(items), nj + 1).round().astype(int)
    return [items[a:b] for a, b in zip(bounds[:-1], bounds[1:], strict=True)]


def gather(jobs: list, method: str, *args: Any) -> list:
    """Call ``method`` on every job (in parallel for RemoteJobs); their results in job order."""
    for job in jobs:
        job.submit(method, *args)
    return [job.result() for job in jobs]
