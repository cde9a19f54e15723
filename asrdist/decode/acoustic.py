"""Acoustic scores per frame and pdf: what the decoder searches HCLG with.

Hybrid models give pseudo log-likelihoods log p(pdf | x) - log p(pdf) (posterior over prior,
Bayes' rule up to a constant), with the features prepared exactly as training prepared them
(CMVN kind, or each column range's normalisation for joined features, from final.pt; edge
frames repeated for the model's context). The GMM baseline
gives true log-likelihoods of its diagonal GMMs, on the features GMM training used
(asrdist.kaldi.gmm_feats: CMN per speaker + deltas).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import kaldiio
import numpy as np

from asrdist.errors import AsrdistError
from asrdist.kaldi.am_gmm import AmDiagGmmParams
from asrdist.kaldi.cmvn import apply_cmvn, cmvn_stats
from asrdist.kaldi.data_dir import DataDir
from asrdist.kaldi.feats_config import check_feats_config, read_feats_config
from asrdist.kaldi.gmm_feats import DELTAS, FeatureTransform, load_features
from asrdist.kaldi.layout import (
    LAYOUT,
    describe,
    needs_speaker_stats,
    normalise,
    read_layout,
    same_columns,
)
from asrdist.options import NON_NEGATIVE, Options, option

log = logging.getLogger(__name__)


def list_utterances(data_dir: str | os.PathLike) -> list[str]:
    """Utterances with features in a data dir, C-sorted; an empty set is an error."""
    utts = DataDir.load(data_dir).utts
    if not utts:
        raise AsrdistError(f"{Path(data_dir) / 'feats.scp'}: empty test set, nothing to decode")
    return utts


@dataclass(frozen=True)
class Chunking(Options):
    """nnet3-compute's --frames-per-chunk, --extra-left-context and --extra-right-context.

    A BLSTM trained on short chunks scores best on windows like its training ones: None takes
    the model's training values (chunk_len, chunk context), frames_per_chunk 0 scores whole
    utterances. A model with a fixed context (the spliced DNN) takes only its own context.
    """

    frames_per_chunk: int | None = option(
        None, "Frames the network scores per chunk (default: its training chunk_len; 0: whole "
              "utterances).", check=NON_NEGATIVE)
    extra_left_context: int | None = option(
        None, "Frames before each chunk the BLSTM sees, outputs dropped (default: its training "
              "chunk-left-context).", check=NON_NEGATIVE)
    extra_right_context: int | None = option(
        None, "Frames after each chunk the BLSTM sees, outputs dropped (default: its training "
              "chunk-right-context).", check=NON_NEGATIVE)


AS_TRAINED = Chunking()  # the model's own training chunk and context


def chunk_starts(frames: int, chunk: int) -> np.ndarray:
    """First frame of each chunk of ``chunk`` frames; the last one ends at ``frames`` (so every
    window has the same width, as the training chunks); one chunk when ``chunk >= frames``."""
    if chunk >= frames:
        return np.zeros(1, dtype=np.int64)
    starts = np.arange(-(-frames // chunk), dtype=np.int64) * chunk
    starts[-1] = frames - chunk
    return starts


def check_model_features(final_pt: str | os.PathLike, data_dir: str | os.PathLike) -> None:
    """Refuse ``data_dir``'s features when they are not made as those ``final_pt`` was trained
    on (asrdist.kaldi.feats_config), before any other input is read; the model is read only
    when the features record how they were made."""
    if read_feats_config(data_dir) is not None:
        from asrdist.models.final import load_final

        check_feats_config(load_final(final_pt)[1].feats_config, final_pt, data_dir)


class NnetScorer:
    """log_softmax(model(x)) - log priors, from an asrdist ``final.pt``, chunk by chunk, on
    ``device`` (the features are prepared on the host, the network and the softmax run there,
    the scores come back as float32)."""

    def __init__(self, final_pt: str | os.PathLike, data_dir: str | os.PathLike,
                 chunking: Chunking = AS_TRAINED, device: str = "cpu"):
        import torch

        from asrdist.devices import torch_device
        from asrdist.models.final import load_final

        self.torch = torch
        self.device = torch_device(device)
        self.model, exported = load_final(final_pt)
        check_feats_config(exported.feats_config, final_pt, data_dir)
        self.model.to(self.device)
        self.path = Path(final_pt)
        self.num_pdfs = exported.num_pdfs
        self.input_dim = exported.input_dim
        self.log_priors = exported.log_priors
        self._priors_on_device = torch.from_numpy(np.asarray(self.log_priors, np.float32)).to(
            self.device)
        self.cmvn = exported.cmvn
        self.norm_vars = exported.cmvn_norm_vars
        self.left = exported.left_context
        self.right = exported.right_context
        left = self.left if chunking.extra_left_context is None else chunking.extra_left_context
        right = self.right if chunking.extra_right_context is None else chunking.extra_right_context
        if not self.model.variable_context and (left, right) != (self.left, self.right):
            raise AsrdistError(f"{final_pt}: the model's context is fixed at {self.left} left, "
                               f"{self.right} right; --extra-*-context cannot change it")
        self.left, self.right = left, right
        fpc = chunking.frames_per_chunk
        self.frames_per_chunk = exported.chunk_len if fpc is None else fpc
        if self.log_priors.shape != (self.num_pdfs,):
            raise AsrdistError(
                f"{final_pt}: {self.log_priors.size} priors for {self.num_pdfs} pdfs")
        # a model trained on joined features normalises each column range as in training
        self.layout = exported.feats_layout
        here = read_layout(data_dir)
        if self.layout is None and here is not None:
            log.warning("%s records no feats_layout: every column of %s is normalised as "
                        "--cmvn %s (as models from before layouts were trained), not per range "
                        "as its feats_layout says (%s)", final_pt, data_dir, self.cmvn,
                        describe(here))
        if self.layout is not None and here is not None and not same_columns(here, self.layout):
            raise AsrdistError(
                f"{Path(data_dir) / LAYOUT}: {describe(here)}, but {final_pt} was trained on "
                f"{describe(self.layout)}; join the test features as the training ones")
        spk = needs_speaker_stats(self.layout) if self.layout else self.cmvn == "spk"
        if spk and not (Path(data_dir) / "cmvn.scp").is_file():
            raise AsrdistError(f"{Path(data_dir) / 'cmvn.scp'}: missing, and {final_pt} was "
                               "trained with per-speaker CMVN")
        self.data = DataDir.load(data_dir)
        self.spk_stats = self.data.cmvn_stats() if spk else {}

    def _features(self, utt: str) -> np.ndarray:
        where = self.data.feats[utt]
        try:
            feats = np.asarray(kaldiio.load_mat(where), dtype=np.float32)
        except Exception as e:  # noqa: BLE001 - a missing ark, a bad offset: bad input here
            raise AsrdistError(f"utterance {utt}: cannot read features {where} "
                               f"({type(e).__name__}: {str(e)[:120]})") from e
        if not np.isfinite(feats).all():  # else "no path survived the beam", exit 0
            raise AsrdistError(f"utterance {utt}: features hold NaN or inf ({where})")
        if feats.ndim != 2 or feats.shape[0] == 0:
            raise AsrdistError(f"{self.data.path / 'feats.scp'}: utterance {utt} has no frames")
        if feats.shape[1] != self.input_dim:
            raise AsrdistError(f"utterance {utt}: feature dimension {feats.shape[1]} but "
                               f"{self.path} expects {self.input_dim}")
        spk = self.data.speaker(utt)
        if self.layout is not None:
            if needs_speaker_stats(self.layout) and spk not in self.spk_stats:
                raise AsrdistError(
                    f"{self.data.path / 'cmvn.scp'}: no stats for speaker {spk} of {utt}")
            try:
                return normalise(feats, self.layout, self.spk_stats.get(spk), self.norm_vars)
            except AsrdistError as e:
                raise AsrdistError(f"utterance {utt}, speaker {spk}: {e.message}") from e
        if self.cmvn == "utt":
            feats = apply_cmvn(feats, cmvn_stats(feats), self.norm_vars)
        elif self.cmvn == "spk":
            if spk not in self.spk_stats:
                raise AsrdistError(
                    f"{self.data.path / 'cmvn.scp'}: no stats for speaker {spk} of {utt}")
            feats = apply_cmvn(feats, self.spk_stats[spk], self.norm_vars)
        return feats

    def logits(self, feats: np.ndarray):
        """frames x num_pdfs float32 logits (a tensor on the scorer's device) of normalised
        features: the utterance cut into chunks of ``frames_per_chunk`` frames (0: one chunk),
        each with ``left``/``right`` context frames (the edges repeat the end frames, as in
        training), run as one batch."""
        torch = self.torch
        frames = feats.shape[0]
        padded = np.pad(feats, ((self.left, self.right), (0, 0)), mode="edge")
        chunk = min(self.frames_per_chunk or frames, frames)
        starts = chunk_starts(frames, chunk)
        windows = padded[starts[:, None] + np.arange(self.left + chunk + self.right)]
        x = torch.from_numpy(np.ascontiguousarray(windows)).to(self.device)
        with torch.no_grad():
            out = self.model(x, self.left, self.right).float()
        logits = torch.empty((frames, out.shape[-1]), dtype=torch.float32, device=self.device)
        for start, chunk_out in zip(starts[::-1].tolist(), out.flip(0), strict=True):
            logits[start:start + chunk] = chunk_out  # overlapping frames: the earlier chunk's
        return logits

    def scores(self, utts: list[str]) -> Iterator[tuple[str, np.ndarray]]:
        """(utt, frames x num_pdfs float32 pseudo log-likelihoods) for each utterance."""
        torch = self.torch
        for utt in utts:
            post = torch.log_softmax(self.logits(self._features(utt)), dim=-1)
            yield utt, (post - self._priors_on_device).cpu().numpy()


_GMM_BATCH = 256  # utterances whose GMM features are loaded together


class GmmScorer:
    """Diagonal-GMM log-likelihoods of every pdf, vectorised over all Gaussians."""

    def __init__(self, am: AmDiagGmmParams, data_dir: str | os.PathLike,
                 transform: FeatureTransform = DELTAS):
        self.transform = transform
        self.num_pdfs = am.num_pdfs
        self.dim = am.dim
        self.gconsts = np.concatenate([p.gconsts for p in am.pdfs]).astype(np.float64)
        self.means_invvars = np.concatenate([p.means_invvars for p in am.pdfs]).astype(np.float64)
        self.inv_vars = np.concatenate([p.inv_vars for p in am.pdfs]).astype(np.float64)
        sizes = np.array([len(p.gconsts) for p in am.pdfs])
        self.offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]])
        self.data = DataDir.load(data_dir, ("utt2spk", "cmvn.scp"))

    def loglikes(self, feats: np.ndarray) -> np.ndarray:
        """frames x num_pdfs log-likelihoods (log-sum-exp over each pdf's Gaussians)."""
        x = feats.astype(np.float64)
        per_gauss = self.gconsts + x @ self.means_invvars.T - 0.5 * (x * x) @ self.inv_vars.T
        peak = np.maximum.reduceat(per_gauss, self.offsets, axis=1)
        peak_per_gauss = np.repeat(peak, np.diff(np.append(self.offsets, per_gauss.shape[1])),
                                   axis=1)
        sums = np.add.reduceat(np.exp(per_gauss - peak_per_gauss), self.offsets, axis=1)
        return (peak + np.log(sums)).astype(np.float32)

    def scores(self, utts: list[str]) -> Iterator[tuple[str, np.ndarray]]:
        # load_features parses feats.scp and cmvn.scp on each call: call it per batch of
        # utterances, not per utterance, yet never hold a whole large test set in memory.
        for first in range(0, len(utts), _GMM_BATCH):
            batch = load_features(self.data, utts[first:first + _GMM_BATCH], self.transform)
            for utt, feats in batch.items():
                if feats.shape[1] != self.dim:
                    raise AsrdistError(f"utterance {utt}: GMM features have dimension "
                                       f"{feats.shape[1]} but the model expects {self.dim}")
                yield utt, self.loglikes(feats)
