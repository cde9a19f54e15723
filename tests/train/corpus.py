"""Test helpers around the tiny learnable corpus of :mod:`asrdist.testing` (its maker,
``make_corpus``, lives in the package so that bench/ can use it without importing tests/):
a poisoned utterance, a config on the corpus, the losses of a run."""

from __future__ import annotations

from pathlib import Path

import kaldiio
import numpy as np


def poison_features(data: Path, utt_index: int = -1) -> str:
    """Put a NaN into one utterance's features (rewritten to a new ark); return its id."""
    scp = (data / "feats.scp").read_text().splitlines()
    utt, rx = scp[utt_index].split()
    bad = np.asarray(kaldiio.load_mat(rx)).copy()
    bad[3] = np.nan
    with kaldiio.WriteHelper(f"ark,scp:{data / 'nan.ark'},{data / 'nan.scp'}") as w:
        w(utt, bad)
    scp[utt_index] = (data / "nan.scp").read_text().strip()
    (data / "feats.scp").write_text("\n".join(scp) + "\n")
    return utt


def train_config(corpus: tuple[Path, Path], out: Path, base: dict, **kw):
    """A TrainConfig on ``corpus`` writing to ``out``: ``base`` settings, then ``kw``."""
    from asrdist.train.config import make_config

    data, targets = corpus
    return make_config(None, {"data": str(data), "targets": str(targets), "out": str(out),
                              **base, **kw})


def train_losses(metrics: Path) -> list[tuple[int, float]]:
    """(step, loss) of every training record of a metrics.jsonl."""
    from asrdist.train.metrics import read_metrics

    return [(r["step"], r["loss"]) for r in read_metrics(metrics) if r["kind"] == "train"]
