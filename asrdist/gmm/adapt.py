"""Per-speaker fMLLR of a data dir against a GMM system: gmm-est-fmllr over alignments
(``ali-to-post | weight-silence-post | gmm-est-fmllr --spk2utt``), as train_sat.sh estimates
its training speakers' transforms and decode_fmllr.sh its test speakers' from a first pass.

Transforms are estimated on the features as they are (already adapted ones included) and
composed with ``previous`` (compose-transforms), so each pass refines the last.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from asrdist.errors import AsrdistError
from asrdist.gmm.fmllr import FmllrStats, compose
from asrdist.gmm.tied_model import AlignmentConverter
from asrdist.hmm.tree import read_tree
from asrdist.kaldi.am_gmm import AmDiagGmmParams
from asrdist.kaldi.data_dir import DataDir
from asrdist.kaldi.final_mdl import read_final_mdl
from asrdist.kaldi.gmm_feats import FeatureTransform, load_features
from asrdist.kaldi.transition_model import TransitionInfo

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class FmllrOptions:
    """gmm-est-fmllr's and the scripts' settings."""

    silence_weight: float = 0.0  # train_sat.sh 0.0; decode_fmllr.sh 0.01
    silence: frozenset[int] = field(default_factory=frozenset)  # silence phone ids
    num_iters: int = 40  # --fmllr-num-iters
    min_count: float = 20.0  # --fmllr-min-count: fewer frames keep the identity


def silence_phones(lang_dir: Path) -> frozenset[int]:
    """The lang's silence phones (phones/silence.csl), whose frames fMLLR weights down."""
    path = Path(lang_dir) / "phones" / "silence.csl"
    try:
        return frozenset(int(x) for x in path.read_text().strip().split(":") if x)
    except (OSError, ValueError) as e:
        raise AsrdistError(f"{path}: unreadable ({e}); fMLLR weights silence frames") from e


@dataclass(frozen=True)
class SoftAlignment:
    """Transition-id posteriors per frame, flattened (a lattice's, lattice-to-post's): what
    decode_fmllr.sh's second pass accumulates, where a best path keeps one guess a frame."""

    num_frames: int
    frames: np.ndarray  # frame index of each entry
    tids: np.ndarray
    weights: np.ndarray

    @classmethod
    def of_alignment(cls, ali: np.ndarray) -> SoftAlignment:
        n = len(ali)
        return cls(n, np.arange(n), np.asarray(ali, dtype=np.int64), np.ones(n))

    @classmethod
    def of_posterior(cls, post: Sequence[Sequence[tuple[int, float]]]) -> SoftAlignment:
        entries = [(t, tid, p) for t, frame in enumerate(post) for tid, p in frame]
        frames, tids, weights = (np.array(c) for c in zip(*entries, strict=True)) if entries \
            else (np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0))
        return cls(len(post), frames.astype(np.int64), tids.astype(np.int64),
                   weights.astype(np.float64))


def speaker_stats(am: AmDiagGmmParams, info: TransitionInfo,
                  frames: Iterable[tuple[str, np.ndarray, np.ndarray | SoftAlignment]],
                  speaker_of: Callable[[str], str], opts: FmllrOptions) -> dict[str, FmllrStats]:
    """Statistics per speaker of (utterance, features, alignment or posteriors) triples."""
    silence = np.array(sorted(opts.silence), dtype=np.int64)
    out: dict[str, FmllrStats] = {}
    for utt, feats, ali in frames:
        soft = ali if isinstance(ali, SoftAlignment) else SoftAlignment.of_alignment(ali)
        if feats.shape[0] != soft.num_frames:
            raise AsrdistError(f"utterance {utt}: {soft.num_frames} aligned frames but "
                               f"{feats.shape[0]} feature frames")
        if feats.shape[1] != am.dim:
            raise AsrdistError(f"utterance {utt}: features have dimension {feats.shape[1]} "
                               f"but the model expects {am.dim}")
        sil = np.isin(info.tid_to_phone[soft.tids], silence)
        weights = soft.weights * np.where(sil, opts.silence_weight, 1.0)
        spk = speaker_of(utt)
        out.setdefault(spk, FmllrStats.zeros(am.dim)).accumulate(
            am, feats[soft.frames], info.tid_to_pdf[soft.tids], weights)
    return out


def sum_speaker_stats(parts: Iterable[Mapping[str, FmllrStats]]) -> dict[str, FmllrStats]:
    """Jobs split utterances, not speakers: a speaker's statistics are summed over them."""
    total: dict[str, FmllrStats] = {}
    for part in parts:
        for spk, stats in part.items():
            total[spk] = total[spk] + stats if spk in total else stats
    return total


def estimate_transforms(stats: Mapping[str, FmllrStats], opts: FmllrOptions,
                        previous: Mapping[str, np.ndarray] | None = None,
                        ) -> tuple[dict[str, np.ndarray], float]:
    """Each speaker's transform (composed after ``previous``'s) and the gain per frame."""
    out, gain, count = {}, 0.0, 0.0
    for spk in sorted(stats):
        w, impr = stats[spk].estimate(opts.num_iters, opts.min_count)
        if previous is not None and spk in previous:
            w = compose(w, previous[spk])
        out[spk] = w
        gain += impr * stats[spk].beta
        count += stats[spk].beta
        if stats[spk].beta < opts.min_count:
            log.warning("speaker %s: %.0f frames for fMLLR, fewer than %.0f: kept as it was",
                        spk, stats[spk].beta, opts.min_count)
    if previous is not None:  # speakers without frames this time keep their transform
        out.update({s: w for s, w in previous.items() if s not in out})
    per_frame = gain / count if count else 0.0
    log.info("fMLLR: %d speakers, %.4f per frame over %.0f frames", len(stats), per_frame, count)
    return out, per_frame


def adapt_data_dir(model_dir: Path, data_dir: Path,
                   alignments: Mapping[str, np.ndarray | SoftAlignment],
                   aligned_with: TransitionInfo,
                   opts: FmllrOptions, previous: Mapping[str, np.ndarray] | None = None,
                   ) -> dict[str, np.ndarray]:
    """Every speaker of ``data_dir`` its transform against ``model_dir``'s system, from
    ``alignments`` (a first pass's best paths, in ``aligned_with``'s transition-ids: converted
    to the system's tree when that is another model's) on the features as ``previous`` adapts
    them. A speaker none of whose utterances was aligned keeps ``previous``'s or the identity."""
    info, am = read_final_mdl(model_dir / "final.mdl")
    if am is None:
        raise AsrdistError(f"{model_dir / 'final.mdl'}: no GMMs in this model")
    if aligned_with.tuples != info.tuples:
        if any(isinstance(a, SoftAlignment) for a in alignments.values()):
            raise AsrdistError(f"posteriors of another model's transition-ids cannot be "
                               f"converted to {model_dir}'s tree: give best paths")
        converter = AlignmentConverter(aligned_with, info, read_tree(model_dir / "tree"))
        alignments = {u: converter.convert(u, a) for u, a in alignments.items()}
    data = DataDir.load(data_dir, ("utt2spk", "cmvn.scp"))
    utts = [u for u in data.utts if u in alignments]
    if not utts:
        raise AsrdistError(f"{data_dir}: none of its utterances has an alignment to adapt with")
    transform = FeatureTransform.of_model_dir(model_dir).with_speakers(previous)
    feats = load_features(data, utts, transform)
    stats = speaker_stats(am, info, ((u, feats[u], alignments[u]) for u in utts), data.speaker,
                          opts)
    out, _ = estimate_transforms(stats, opts, previous)
    identity = np.hstack([np.eye(am.dim), np.zeros((am.dim, 1))])
    for spk in sorted({data.speaker(u) for u in data.utts} - set(out)):
        log.warning("speaker %s: no aligned utterance; its transform is the identity", spk)
        out[spk] = identity
    return out
