"""Kaldi CMVN statistics and their application (numpy only, cheap to import in worker jobs)."""

from __future__ import annotations

import numpy as np

from asrdist.errors import AsrdistError


def cmvn_stats(feats: np.ndarray) -> np.ndarray:
    """Kaldi CMVN stats of one matrix: 2 x (dim+1) float64, [sums, count; squares, 0]."""
    feats = np.asarray(feats, dtype=np.float64)
    stats = np.zeros((2, feats.shape[1] + 1))
    stats[0, :-1] = feats.sum(axis=0)
    stats[0, -1] = feats.shape[0]
    stats[1, :-1] = (feats**2).sum(axis=0)
    return stats


def apply_cmvn(feats: np.ndarray, stats: np.ndarray, norm_vars: bool = False) -> np.ndarray:
    """Normalise ``feats`` with Kaldi CMVN ``stats`` (as apply-cmvn): subtract the mean, and
    divide by the standard deviation when ``norm_vars``. Returns float32."""
    stats = np.asarray(stats, dtype=np.float64)
    count = stats[0, -1]
    if stats.shape != (2, feats.shape[1] + 1) or count < 1:
        raise AsrdistError(
            f"CMVN stats of shape {stats.shape} and count {count} do not fit {feats.shape[1]}-dim "
            "features"
        )
    mean = stats[0, :-1] / count
    out = np.asarray(feats, dtype=np.float64) - mean
    if norm_vars:
        var = stats[1, :-1] / count - mean**2
        out /= np.sqrt(np.maximum(var, 1e-10))
    return out.astype(np.float32)
