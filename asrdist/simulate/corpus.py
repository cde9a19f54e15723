"""A corpus in memory for simulated learners: every training chunk read once, then dealt.

Real learners each stream their shard from disk; a simulator of 64 learners in one process
reads the corpus once (the same reader, CMVN and chunking as training) and keeps the chunks as
one tensor. Each epoch the chunks are permuted from ``(seed, epoch)``; step k's global batch is
the next ``learners x batch`` of them and learner i takes the i-th slice of ``batch``, so N
learners of batch b see what one learner of batch N*b sees (synchronous SGD's invariant holds
on real data too).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from asrdist.data.dataset import (
    IGNORE,
    UtteranceReader,
    load_corpus,
    make_chunks,
    split_heldout,
)
from asrdist.data.ingest import read_pdf_counts
from asrdist.errors import AsrdistError
from asrdist.kaldi.layout import Layout
from asrdist.train.loss import frame_scores


@dataclass
class ChunkSet:
    x: torch.Tensor  # (chunks, chunk_len, dim) float32
    y: torch.Tensor  # (chunks, chunk_len) int64, IGNORE where not labelled

    def __len__(self) -> int:
        return len(self.x)

    def frames(self) -> int:
        """Labelled frames (padding and overlap carry no label)."""
        return int((self.y != IGNORE).sum())


@dataclass
class ChunkPool:
    train: ChunkSet
    heldout: ChunkSet
    num_pdfs: int
    input_dim: int
    chunk_len: int
    cmvn: str = "none"  # the features' normalisation (what a decoder must apply too)
    pdf_counts: np.ndarray | None = None  # the alignments' frames per pdf (for the priors)
    feats_layout: Layout | None = None  # the data dir's streams and their normalisation, if joined
    utts: tuple[int, int] = (0, 0)  # training and held-out utterances read
    feats_config: dict[str, Any] | None = None  # what made the features (feats_config.json)

    @classmethod
    def load(cls, data: str | os.PathLike, targets: str | os.PathLike, chunk_len: int = 21,
             heldout_utts: int = 100, cmvn: str = "spk", seed: int = 0,
             max_utts: int = 0) -> ChunkPool:
        """Read the chunks of ``data`` (a Kaldi data dir) with ``targets`` (an ingested
        alignment dir); ``max_utts`` > 0 keeps that many training utterances (smaller studies)."""
        corpus = load_corpus(data, targets)
        train_rows, held_rows = split_heldout(corpus, heldout_utts, seed)
        if max_utts:
            train_rows = train_rows[:max_utts]
        reader = UtteranceReader(corpus, cmvn, False, None)
        try:
            train = _read(reader, train_rows, chunk_len)
            held = _read(reader, held_rows, chunk_len)
        finally:
            reader.close()
        return cls(train, held, corpus.num_pdfs, int(train.x.shape[-1]), chunk_len, cmvn,
                   read_pdf_counts(targets, corpus.num_pdfs), corpus.feats_layout,
                   (len(train_rows), len(held_rows)), corpus.feats_config)

    def describe(self) -> dict[str, object]:
        """What a run's report says of its data: sizes of both sets and the features."""
        sets = {"train": self.train, "heldout": self.heldout}
        return {"utterances": dict(zip(sets, self.utts, strict=True)),
                "chunks": {k: len(v) for k, v in sets.items()},
                "frames": {k: v.frames() for k, v in sets.items()},
                "chunk_len": self.chunk_len, "input_dim": self.input_dim,
                "pdfs": self.num_pdfs, "cmvn": self.cmvn}

    def steps_per_epoch(self, global_batch: int) -> int:
        """Steps of ``global_batch`` chunks in one epoch (the remainder is dropped)."""
        steps = len(self.train) // global_batch
        if steps == 0:
            raise AsrdistError(f"a global batch of {global_batch} chunks is more than the "
                               f"{len(self.train)} chunks of the corpus")
        return steps

    def batch(self, learner: int, step: int, learners: int, batch: int,
              seed: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Learner ``learner``'s batch of ``step`` (steps count on across epochs)."""
        per_epoch = self.steps_per_epoch(learners * batch)
        epoch, k = divmod(step, per_epoch)
        perm = _permutation(len(self.train), seed, epoch)
        lo = (k * learners + learner) * batch
        rows = perm[lo : lo + batch]
        return self.train.x[rows], self.train.y[rows]


_PERMS: dict[tuple[int, int, int], torch.Tensor] = {}


def _permutation(n: int, seed: int, epoch: int) -> torch.Tensor:
    key = (n, seed, epoch)
    if key not in _PERMS:
        _PERMS.clear()  # one epoch at a time is in use
        _PERMS[key] = torch.from_numpy(np.random.default_rng([seed, epoch]).permutation(n))
    return _PERMS[key]


def _read(reader: UtteranceReader, rows: np.ndarray, chunk_len: int) -> ChunkSet:
    xs, ys = [], []
    for row in rows:
        x, y = make_chunks(*reader.read(int(row)), chunk_len, 0, 0)
        xs.append(x)
        ys.append(y)
    if not xs:
        raise AsrdistError("no utterances to read (check --heldout-utts and the corpus size)")
    return ChunkSet(torch.from_numpy(np.concatenate(xs)), torch.from_numpy(np.concatenate(ys)))


@torch.no_grad()
def heldout_figures(model: torch.nn.Module, held: ChunkSet, batch: int = 512) -> dict[str, float]:
    """Held-out cross-entropy per labelled frame and frame accuracy."""
    ce, correct, frames = 0.0, 0, 0
    for lo in range(0, len(held), batch):
        x, y = held.x[lo : lo + batch], held.y[lo : lo + batch].reshape(-1)
        batch_ce, batch_correct, batch_frames = frame_scores(model(x).reshape(len(y), -1), y)
        ce, correct, frames = ce + batch_ce, correct + batch_correct, frames + batch_frames
    return {"heldout_ce": ce / max(frames, 1), "heldout_acc": correct / max(frames, 1)}
