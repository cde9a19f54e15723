"""GMM features: MFCC + per-speaker CMN + deltas, as Kaldi's train_mono.sh pipes them.

``apply-cmvn --utt2spk=... scp:cmvn.scp scp:feats.scp ark:- | add-deltas ark:- ark:-``; an
LDA+MLLT system (train_lda_mllt.sh) instead splices the CMN'd frames and multiplies them by
its ``final.mat`` (``splice-feats | transform-feats``): ``FeatureTransform`` says which, read
from the model's dir. GMM training reads them, and so does decoding with the GMM: hence here,
below both.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path

import kaldiio
import numpy as np

from asrdist.errors import AsrdistError
from asrdist.fsutil import atomic_path
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


def splice_frames(feats: np.ndarray, left: int, right: int) -> np.ndarray:
    """Each frame with ``left`` frames before and ``right`` after it side by side, the end
    frames repeated past the edges (Kaldi's splice-feats)."""
    t = feats.shape[0]
    index = np.clip(np.arange(t)[:, None] + np.arange(-left, right + 1)[None, :], 0, t - 1)
    return feats[index].reshape(t, -1)


def apply_affine(w: np.ndarray, feats: np.ndarray) -> np.ndarray:
    """transform-feats with an affine matrix ``[A b]``: ``A x + b`` per frame."""
    return (feats.astype(np.float64) @ w[:, :-1].T + w[:, -1]).astype(np.float32)


@dataclass(frozen=True, eq=False)
class FeatureTransform:
    """Deltas (``matrix`` None), or frames spliced ``left``/``right`` times ``matrix``
    (transform-feats: a last column, when the matrix has one more than the input, is an
    offset); ``splice_only``: the spliced frames themselves (what LDA is estimated on).
    ``speakers``: a speaker-adapted (SAT) system's fMLLR transforms, d x (d+1) per speaker,
    applied last (Kaldi's ``transform-feats --utt2spk ... ark:trans.N``)."""

    matrix: np.ndarray | None = None
    left: int = 3
    right: int = 3
    splice_only: bool = False
    speakers: Mapping[str, np.ndarray] | None = None

    def apply(self, cmn: np.ndarray, speaker: str | None = None) -> np.ndarray:
        feats = self._model_features(cmn)
        if self.speakers is None:
            return feats
        w = self.speakers.get(speaker) if speaker is not None else None
        if w is None:
            raise AsrdistError(f"no fMLLR transform for speaker {speaker}")
        if w.shape != (feats.shape[1], feats.shape[1] + 1):
            raise AsrdistError(f"speaker {speaker}'s fMLLR transform is {w.shape[0]}x"
                               f"{w.shape[1]} but the features have dimension {feats.shape[1]}")
        return apply_affine(w, feats)

    def with_speakers(self, transforms: Mapping[str, np.ndarray] | None) -> FeatureTransform:
        return replace(self, speakers=transforms)

    def _model_features(self, cmn: np.ndarray) -> np.ndarray:
        if self.splice_only:
            return splice_frames(cmn, self.left, self.right)
        if self.matrix is None:
            return add_deltas(cmn)
        spliced = splice_frames(cmn, self.left, self.right).astype(np.float64)
        m = self.matrix
        if m.shape[1] == spliced.shape[1] + 1:
            return apply_affine(m, spliced)
        if m.shape[1] == spliced.shape[1]:
            return (spliced @ m.T).astype(np.float32)
        raise AsrdistError(f"feature transform is {m.shape[0]}x{m.shape[1]} but the "
                           f"spliced features have dimension {spliced.shape[1]}")

    @classmethod
    def of_model_dir(cls, model_dir: str | os.PathLike) -> FeatureTransform:
        """``final.mat`` and ``splice_opts`` beside a final.mdl, or deltas without them."""
        model_dir = Path(model_dir)
        mat = model_dir / "final.mat"
        if not mat.is_file():
            return cls()
        try:
            matrix = np.asarray(kaldiio.load_mat(str(mat)), dtype=np.float64)
        except Exception as e:  # kaldiio raises several types for a damaged file
            raise AsrdistError(f"{mat}: not a Kaldi matrix ({e})") from e
        opts = model_dir / "splice_opts"
        text = opts.read_text() if opts.is_file() else ""
        left = re.search(r"--left-context=(\d+)", text)
        right = re.search(r"--right-context=(\d+)", text)
        return cls(matrix, int(left.group(1)) if left else 3, int(right.group(1)) if right else 3)


DELTAS = FeatureTransform()


def write_speaker_transforms(path: str | os.PathLike, transforms: Mapping[str, np.ndarray]) -> None:
    """Per-speaker fMLLR transforms as a Kaldi archive of matrices (Kaldi's trans.N)."""
    with atomic_path(path) as tmp:
        kaldiio.save_ark(str(tmp), {s: np.asarray(transforms[s], dtype=np.float32)
                                    for s in sorted(transforms, key=str.encode)})


def read_speaker_transforms(path: str | os.PathLike) -> dict[str, np.ndarray]:
    """A Kaldi archive of per-speaker d x (d+1) matrices."""
    try:
        out = {k: np.asarray(v, dtype=np.float64) for k, v in kaldiio.load_ark(str(path))}
    except Exception as e:  # kaldiio raises several types for a damaged file
        raise AsrdistError(f"{path}: not an archive of fMLLR matrices ({e})") from e
    for spk, m in out.items():
        if m.ndim != 2 or m.shape[1] != m.shape[0] + 1:
            raise AsrdistError(f"{path}: speaker {spk}'s transform is {m.shape}, not d x (d+1)")
    return out


def load_features(data: DataDir, utts: Iterable[str],
                  transform: FeatureTransform = DELTAS) -> dict[str, np.ndarray]:
    """CMN'd (per speaker, means only, as train_mono.sh) MFCC, then deltas or ``transform``,
    for ``utts``."""
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
            out[u] = transform.apply(apply_cmvn(feats, stats[spk], norm_vars=False), spk)
    finally:
        for fd in fds.values():
            fd.close()
    return out
