"""One split of the training data (a Kaldi JOB), run where an asrdist.jobs Runner puts it.

A job owns its utterances' features, training graphs and current alignments for the whole
training run, so graphs are compiled once; per EM pass the parent sends the model (khg models
pickle) and gets numpy statistics back.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import kaldi_hmm_gmm as khg  # before kaldifst, which asrdist.hmm loads
import numpy as np

from asrdist.gmm.decodable import gmm_decodable
from asrdist.gmm.stats import GmmStats, accumulate
from asrdist.hmm.align import AlignOptions, equal_alignment, viterbi_alignment
from asrdist.hmm.graphs import GraphCompiler
from asrdist.kaldi.am_gmm import am_params_from_khg
from asrdist.kaldi.data_dir import DataDir
from asrdist.kaldi.gmm_feats import DELTAS, GMM_TABLES, FeatureTransform, load_features
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
        transform: FeatureTransform = DELTAS,
    ):
        data, lang = DataDir.load(data_dir, GMM_TABLES), Lang.load(lang_dir)
        self.data = data
        self.utts = utts
        train_set = set(train_utts)
        self.train_utts = [u for u in utts if u in train_set]
        self.feats = load_features(data, utts, transform)
        compiler = GraphCompiler(lang, tree, trans_model)
        self.graphs = {u: compiler.compile(lang.word_ids(u, data.text[u], map_oov)) for u in utts}
        self.alis: dict[str, np.ndarray] = {}
        self.trans_model = trans_model
        self.am: khg.AmDiagGmm | None = None

    def set_model(self, am: khg.AmDiagGmm, trans_model: khg.TransitionModel) -> None:
        self.am, self.trans_model = am, trans_model

    def set_transform(self, transform: FeatureTransform) -> None:
        """Features through a new transform (an MLLT pass of train_lda_mllt.sh)."""
        self.feats = load_features(self.data, self.utts, transform)

    def set_alignments(self, alis: dict[str, np.ndarray]) -> None:
        """Start from given alignments: the previous system's, converted (convert-ali)."""
        self.alis = {u: alis[u] for u in self.train_utts if u in alis}

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

    def accumulate(self, stats_transform: FeatureTransform | None = None) -> GmmStats:
        """gmm-acc-stats-ali over the current alignments; with ``stats_transform``
        gmm-acc-stats-twofeats: the posteriors of these features, the statistics of the same
        utterances through that transform."""
        assert self.am is not None, "set_model first"
        params = am_params_from_khg(self.am)
        stats = GmmStats.zeros(params, self.trans_model.num_transition_ids)
        if self.alis:
            tid2pdf = np.asarray(self.trans_model.transition_id_to_pdf_array(), dtype=np.int64)
            tids = np.concatenate(list(self.alis.values()))
            feats = np.concatenate([self.feats[u] for u in self.alis])
            other = None
            if stats_transform is not None:
                loaded = load_features(self.data, list(self.alis), stats_transform)
                other = np.concatenate([loaded[u] for u in self.alis])
            accumulate(stats, params, feats, tid2pdf[tids], tids, other)
        return stats

    def alignments(self) -> list[tuple[str, np.ndarray]]:
        return [(u, self.alis[u]) for u in self.utts if u in self.alis]
