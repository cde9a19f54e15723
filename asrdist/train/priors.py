"""Pdf priors from the alignment frame counts, for hybrid decoding.

Decoding divides posteriors by priors: log p(x|s) = log p(s|x) - log p(s) + const.
"""

from __future__ import annotations

import os

import numpy as np

from asrdist.errors import AsrdistError


def read_pdf_counts(path: str | os.PathLike, num_pdfs: int) -> np.ndarray:
    """A Kaldi text vector ``[ c0 c1 ... ]`` of frame counts per pdf."""
    try:
        text = open(path).read().replace("[", " ").replace("]", " ").split()
        counts = np.array([float(t) for t in text], dtype=np.float64)
    except (OSError, ValueError) as e:
        raise AsrdistError(f"{path}: cannot read pdf counts ({e})") from e
    if len(counts) != num_pdfs:
        raise AsrdistError(f"{path}: {len(counts)} pdf counts for {num_pdfs} pdfs")
    if (counts < 0).any() or counts.sum() <= 0:
        raise AsrdistError(f"{path}: pdf counts must be non-negative and not all zero")
    return counts


def log_priors(counts: np.ndarray, floor: float = 1.0) -> np.ndarray:
    """log of normalized counts, each count floored at ``floor`` frames.

    A pdf never seen in the alignments would get log 0 = -inf and dominate decoding; one
    frame's worth of prior keeps it finite without favouring it.
    """
    floored = np.maximum(counts, floor)
    return np.log(floored / floored.sum()).astype(np.float32)
