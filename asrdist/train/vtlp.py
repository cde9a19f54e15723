"""Vocal tract length perturbation (Jaitly & Hinton, 2013) of MFCC training chunks.

A speaker's vocal tract length scales the frequencies of its formants, and a network trained on
a few voices learns their scales; a voice never heard in training has another. VTLP warps each
training chunk's frequency axis by a random factor, so that training hears a continuum of
vocal tract lengths rather than a handful (speed perturbation gives three, tied to tempo).

The features are already cepstra, so the warp is applied to them as one matrix per factor:
an MFCC vector is the (liftered) cosine transform of the log mel spectrum, so its truncated
inverse is a smooth log mel spectrum defined at any fractional bin, and the warped spectrum at
bin j is that series read where frequency f_j / alpha falls. At alpha 1 the matrix is the
identity. Like SpecAugment, it acts after CMVN: the mean commutes with the (linear) warp, and
the liftered cepstra have similar scales, so the variance normalisation barely changes it.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

from asrdist.errors import AsrdistError

NUM_FACTORS = 41  # warp factors tabulated evenly over [1 - W, 1 + W]
UPPER_CUTOFF = 0.8  # above this share of the top frequency the warp bends back to the top


def _mel(freq: np.ndarray | float) -> np.ndarray:
    return 1127.0 * np.log1p(np.asarray(freq, dtype=np.float64) / 700.0)


def _inverse_mel(mel: np.ndarray) -> np.ndarray:
    return 700.0 * np.expm1(mel / 1127.0)


def _source_frequency(freq: np.ndarray, alpha: float, high: float) -> np.ndarray:
    """Where the warped spectrum at ``freq`` is read from the original one: ``freq / alpha``
    up to a cutoff, then a straight line to ``high``, so that the band maps onto itself
    (Kaldi's VTLN warp is piecewise linear for the same reason)."""
    cutoff = UPPER_CUTOFF * high * min(1.0, alpha)
    above = cutoff / alpha + (freq - cutoff) * (high - cutoff / alpha) / (high - cutoff)
    return np.where(freq <= cutoff, freq / alpha, above)


def _dct_rows(num_ceps: int, positions: np.ndarray, num_bins: int) -> np.ndarray:
    """(num_ceps, len(positions)): the orthonormal DCT-II basis at fractional bin positions
    (lhotse's and Kaldi's MFCC matrix at integer ones)."""
    k = np.arange(num_ceps)[:, None]
    basis = np.cos(math.pi / num_bins * (positions[None, :] + 0.5) * k)
    basis *= math.sqrt(2.0 / num_bins)
    basis[0] /= math.sqrt(2.0)
    return basis


def _lifter(num_ceps: int, q: float) -> np.ndarray:
    if q == 0:
        return np.ones(num_ceps)
    return 1.0 + 0.5 * q * np.sin(math.pi * np.arange(num_ceps) / q)


def cepstral_warp(alpha: float, config: dict) -> np.ndarray:
    """(num_ceps, num_ceps) matrix W with ``W @ c`` the cepstra of the spectrum warped by
    ``alpha`` (> 1: formants move up, a shorter vocal tract), for MFCCs made by lhotse's
    extractor with ``config`` (its feats_config.json)."""
    num_bins, num_ceps = int(config["num_filters"]), int(config["num_ceps"])
    nyquist = config["sampling_rate"] / 2.0
    low = float(config["low_freq"])
    high = float(config["high_freq"]) + (nyquist if config["high_freq"] <= 0 else 0.0)
    mel_low, mel_high = _mel(low), _mel(high)
    delta = (mel_high - mel_low) / (num_bins + 1)
    centres = _inverse_mel(mel_low + delta * np.arange(1, num_bins + 1))
    positions = (_mel(_source_frequency(centres, alpha, high)) - mel_low) / delta - 1.0
    lifter = _lifter(num_ceps, float(config["cepstral_lifter"]))
    analysis = _dct_rows(num_ceps, np.arange(num_bins, dtype=np.float64), num_bins)
    synthesis = _dct_rows(num_ceps, positions, num_bins).T  # spectrum at the source bins
    return (lifter[:, None] * analysis) @ synthesis / lifter[None, :]


def read_mfcc_config(data_dir: str | Path, input_dim: int) -> dict:
    """The lhotse MFCC configuration of ``data_dir``'s features; refuses other features."""
    path = Path(data_dir) / "feats_config.json"
    try:
        config = json.loads(path.read_text())
    except FileNotFoundError:
        raise AsrdistError(f"--vtlp-warp needs the features' configuration, {path}, which "
                           "asrdist-features writes; it is missing") from None
    if "num_ceps" not in config:
        raise AsrdistError(f"--vtlp-warp warps MFCC input; {path} describes other features")
    if config["num_ceps"] != input_dim:
        raise AsrdistError(f"--vtlp-warp: {path} has {config['num_ceps']} cepstra, the "
                           f"input has {input_dim} dims")
    return config


def make_vtlp(max_warp: float, config: dict) -> Callable[[torch.Tensor], torch.Tensor]:
    """A function warping each chunk of a (chunks, frames, cepstra) batch by a factor drawn
    from torch's generator among NUM_FACTORS even steps over [1 - max_warp, 1 + max_warp]."""
    if not 0 < max_warp < 0.5:
        raise AsrdistError(f"--vtlp-warp must be in (0, 0.5), got {max_warp}")
    factors = np.linspace(1.0 - max_warp, 1.0 + max_warp, NUM_FACTORS)
    table = torch.from_numpy(np.stack([cepstral_warp(a, config).T for a in factors])).float()

    def apply(x: torch.Tensor) -> torch.Tensor:
        picks = torch.randint(NUM_FACTORS, (x.shape[0],))
        return torch.bmm(x, table[picks].to(x.dtype))

    return apply
