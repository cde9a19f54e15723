"""Scores like a network's (log-softmax of smooth logits minus log priors), 37 frames x 11 pdfs,
written as Kaldi compressed matrices the way asrdist-compute-loglikes writes them:
``python make_scores.py scores.ark`` (two utterances: 2byte and 1byte)."""

import sys

import kaldiio
import numpy as np

from asrdist.decode.loglikes import COMPRESSION


def scores() -> np.ndarray:
    t = np.arange(37, dtype=np.float64)[:, None]
    p = np.arange(11, dtype=np.float64)[None, :]
    logits = 4.0 * np.sin(0.3 * t + 0.7 * p) + 0.5 * p
    post = logits - np.log(np.exp(logits).sum(axis=1, keepdims=True))
    priors = np.log(np.linspace(1.0, 3.0, 11) / np.linspace(1.0, 3.0, 11).sum())
    return (post - priors).astype(np.float32)


if __name__ == "__main__":
    with open(sys.argv[1], "wb") as f:
        for name in ("2byte", "1byte"):
            kaldiio.save_ark(f, {f"utt-{name}": scores()}, compression_method=COMPRESSION[name])
