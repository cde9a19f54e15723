"""GMM features: MFCC + per-speaker CMN + deltas, as Kaldi's train_mono.sh pipes them.

``apply-cmvn --utt2spk=... scp:cmvn.scp scp:feats.scp ark:- | add-deltas ark:- ark:-``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import kaldiio
import numpy as np

from asrdist.data.cmvn import apply_cmvn
from asrdist.data.kaldi_dir import read_table
from asrdist.errors import AsrdistError


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


@dataclass
class DataDir:
    """The parts of a Kaldi data dir that GMM training reads."""

    path: Path
    utts: list[str]  # sorted, those with features
    text: dict[str, list[str]]
    utt2spk: dict[str, str]

    @classmethod
    def load(cls, path: Path) -> DataDir:
        path = Path(path)
        for name in ("feats.scp", "cmvn.scp", "text", "utt2spk"):
            if not (path / name).is_file():
                raise AsrdistError(f"{path / name}: missing (run asrdist-features first)")
        text = {u: t.split() for u, t in read_table(path / "text").items()}
        utt2spk = read_table(path / "utt2spk", require_value=True)
        utts = sorted(read_table(path / "feats.scp", require_value=True), key=str.encode)
        for u in utts:
            if u not in text:
                raise AsrdistError(f"{path / 'text'}: no transcript for utterance {u}")
            if u not in utt2spk:
                raise AsrdistError(f"{path / 'utt2spk'}: no speaker for utterance {u}")
        return cls(path, utts, text, utt2spk)


def load_features(data: DataDir, utts: Iterable[str]) -> dict[str, np.ndarray]:
    """CMN'd (per speaker, means only, as train_mono.sh) MFCC + deltas for ``utts``."""
    feats_scp = kaldiio.load_scp(str(data.path / "feats.scp"))
    cmvn_scp = kaldiio.load_scp(str(data.path / "cmvn.scp"))
    out = {}
    for u in utts:
        spk = data.utt2spk[u]
        if spk not in cmvn_scp:
            raise AsrdistError(f"{data.path / 'cmvn.scp'}: no stats for speaker {spk} of {u}")
        feats = np.asarray(feats_scp[u], dtype=np.float32)
        if feats.ndim != 2 or feats.shape[0] == 0:
            raise AsrdistError(f"{data.path / 'feats.scp'}: utterance {u} has no frames")
        out[u] = add_deltas(apply_cmvn(feats, np.asarray(cmvn_scp[spk]), norm_vars=False))
    return out
