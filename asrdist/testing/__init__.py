"""Synthetic inputs for exercising asrdist without a real corpus (as numpy.testing and
lhotse.testing ship theirs): a tiny learnable corpus on disk, in the formats asrdist-train
reads, written with kaldiio. The test suite's fixtures and the fault-injection benchmark
(bench/faults.py) both train on it.

Each utterance is a sequence of segments; a segment's pdf decides the mean of its frames, so a
model can learn the mapping (and memorise the set).
"""

from __future__ import annotations

import json
from pathlib import Path

import kaldiio
import numpy as np


def make_corpus(
    root: Path,
    num_utts: int = 12,
    dim: int = 13,
    num_pdfs: int = 5,
    num_speakers: int = 3,
    frames: tuple[int, int] = (30, 80),
    seed: int = 0,
) -> tuple[Path, Path]:
    """Write ``root/data`` (Kaldi data dir) and ``root/targets`` (ingested pdfs); return both."""
    rng = np.random.default_rng(seed)
    data, targets = root / "data", root / "targets"
    data.mkdir(parents=True)
    targets.mkdir(parents=True)
    means = rng.normal(0, 2, (num_pdfs, dim))
    feats, pdfs, utt2spk = {}, {}, {}
    for n in range(num_utts):
        spk = f"spk{n % num_speakers}"
        utt = f"{spk}-utt{n:03d}"
        length = int(rng.integers(*frames))
        labels = np.repeat(rng.integers(0, num_pdfs, length), rng.integers(3, 8, length))[:length]
        offset = rng.normal(0, 1, dim)  # a speaker/channel offset that CMVN removes
        feats[utt] = (means[labels] + offset + rng.normal(0, 0.3, (length, dim))).astype(
            np.float32
        )
        pdfs[utt] = labels.astype(np.int32)
        utt2spk[utt] = spk
    utts = sorted(feats)
    with kaldiio.WriteHelper(f"ark,scp:{data / 'feats.ark'},{data / 'feats.scp'}") as w:
        for u in utts:
            w(u, feats[u])
    with kaldiio.WriteHelper(f"ark,scp:{targets / 'pdf.ark'},{targets / 'pdf.scp'}") as w:
        for u in utts:
            w(u, pdfs[u])
    (data / "utt2spk").write_text("".join(f"{u} {utt2spk[u]}\n" for u in utts))
    (data / "utt2num_frames").write_text("".join(f"{u} {len(feats[u])}\n" for u in utts))
    stats = {}
    for u in utts:
        f = feats[u].astype(np.float64)
        s = stats.setdefault(utt2spk[u], np.zeros((2, dim + 1)))
        s[0, :-1] += f.sum(0)
        s[1, :-1] += (f * f).sum(0)
        s[0, -1] += len(f)
    with kaldiio.WriteHelper(f"ark,scp:{data / 'cmvn.ark'},{data / 'cmvn.scp'}") as w:
        for spk in sorted(stats):
            w(spk, stats[spk])
    counts = np.bincount(np.concatenate(list(pdfs.values())), minlength=num_pdfs)
    (targets / "num_pdfs").write_text(f"{num_pdfs}\n")
    (targets / "pdf_counts").write_text("[ " + " ".join(map(str, counts)) + " ]\n")
    _write_mfcc_config(data, dim)
    return data, targets


def cut_unsampled_utterance(data: Path, sampled: int = 64) -> str:
    """Damage one utterance that asrdist-train's check before training does not read (the
    ``sampled`` spread over the corpus, asrdist.data.dataset.check_sample): its features move
    to an ark of their own, cut in the middle of the matrix. Returns its id; the corpus needs
    more than ``sampled`` utterances."""
    scp = (data / "feats.scp").read_text().splitlines()
    picked = set(np.linspace(0, len(scp) - 1, sampled).round().astype(int))
    index = next(i for i in range(len(scp) // 2, len(scp)) if i not in picked)
    utt, rx = scp[index].split()
    matrix = kaldiio.load_mat(rx)
    bad = data / "bad.ark"
    with kaldiio.WriteHelper(f"ark:{bad}") as w:
        w(utt, matrix)
    bad.write_bytes(bad.read_bytes()[: len(utt) + 16 + matrix.nbytes // 2])
    scp[index] = f"{utt} {bad}:{len(utt) + 1}"
    (data / "feats.scp").write_text("\n".join(scp) + "\n")
    return utt


def _write_mfcc_config(data: Path, dim: int) -> None:
    """feats_config.json as asrdist-features writes it, as if the features were ``dim``
    MFCCs (what --vtlp-warp reads)."""
    from asrdist.data.features import FeatureOptions, feats_config

    options = FeatureOptions(kind="mfcc", num_ceps=dim, num_mel_bins=max(23, dim + 1))
    config = feats_config(options)
    (data / "feats_config.json").write_text(json.dumps(config))
