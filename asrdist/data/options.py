"""How a run reads its training data: chunks of labelled frames, batched and shuffled, with the
features normalised; asrdist-train's options and asrdist-simulate's (asrdist.options)."""

from __future__ import annotations

from dataclasses import dataclass

from asrdist.options import POSITIVE, Options, option

CMVN = ("spk", "utt", "none")


@dataclass(frozen=True)
class DataOptions(Options):
    """Chunks, batch, normalisation and shuffling of the training data."""

    chunk_len: int = option(21, "labelled frames per training chunk (IBM: 21)", check=POSITIVE)
    batch_size: int = option(256, "chunks per learner per step", check=POSITIVE)
    cmvn: str = option("spk", "mean (and variance) normalisation: per speaker from cmvn.scp, "
                       "per utterance, or none", CMVN)
    cmvn_norm_vars: bool = option(False, "normalise variances too (apply-cmvn --norm-vars)")
    shuffle_buffer: int = option(8192, "chunks in the shuffle buffer (memory is about "
                                 "buffer x chunk frames x dim x 4 bytes)", check=POSITIVE)
