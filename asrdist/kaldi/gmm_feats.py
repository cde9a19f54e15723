"""GMM features: MFCC + per-speaker CMN + deltas, as Kaldi's train_mono.sh pipes them.

``apply-cmvn --utt2spk=... scp:cmvn.scp scp:feats.scp ark:- | add-deltas ark:- ark:-``.
GMM training reads them, and so does decoding with the GMM: hence here, below both.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import lru_cache

import kaldiio
import numpy as np

from asrdist.errors import AsrdistError
from asrdist.kaldi.cmvn import apply_cmvn
from asrdist.kaldi.data_dir import DataDir

# What GMM training needs of a data dir (decoding needs no transcripts).
GMM_TABLES = ("text", "utt2spk", "cmvn.scp")


@lru_cache(maxsize=8)
def delta_scales(order: int = 2, window: int = 2) -> tuple[np.ndarray, ...]:
    """Kaldi DeltaFeatures filters: order k = order k-1 convolved with j/sum(j^2), |j|<=window."""
    scales = [np.ones(1)]
    ramp = np.arange(-window, window + 1, dtype=np.float64)
    for _ in range(order):
        scales.append(np.convolve(scales[-1], ramp) / np.sum(ramp * ramp))
    return tuple(scales)


def add_deltas(feats: np.ndarray, order: int = 2, window: int = 2) -> np.ndarray:
    """Append delta and delta-delta features (Kaldi add-deltas; edges repeat the end frames)."""
    scales = delta_scales(order, window)
    reach = (len(scales[-1]) - 1) // 2
    padded = np.concatenate(
        [np.repeat(feats[:1], reach, axis=0), feats, np.repeat(feats[-1:], reach, axis=0)]
    ).astype(np.float64)
    t = feats.shape[0]
    out = []
    for filt in scales:
        half = (len(filt) - 1) // 2
        acc = np.zeros(feats.shape, dtype=np.float64)
        for j, c in enumerate(filt):
            start = reach - half + j
            acc += c * padded[start:start + t]
        out.append(acc)
    return np.concatenate(out, axis=1).astype(np.float32)


def load_features(data: DataDir, utts: Iterable[str]) -> dict[str, np.ndarray]:
    """CMN'd (per speaker, means only, as train_mono.sh) MFCC + deltas for ``utts``."""
    stats = data.cmvn_stats()
    fds: dict = {}
    out = {}
    try:
        for u in utts:
            spk = data.speaker(u)
            if spk not in stats:
                raise AsrdistError(f"{data.path / 'cmvn.scp'}: no stats for speaker {spk} of {u}")
            feats = np.asarray(kaldiio.load_mat(data.feats[u], fd_dict=fds), dtype=np.float32)
            if feats.ndim != 2 or feats.shape[0] == 0:
                raise AsrdistError(f"{data.path / 'feats.scp'}: utterance {u} has no frames")
            out[u] = add_deltas(apply_cmvn(feats, stats[spk], norm_vars=False))
    finally:
        for fd in fds.values():
            fd.close()
    return out
