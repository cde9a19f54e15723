"""Held-out cross-entropy and frame accuracy: one evaluation for the trainer and the studies."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from asrdist.data.dataset import Corpus, UtteranceReader, heldout_batches
from asrdist.train.config import TrainConfig
from asrdist.train.loss import frame_scores


@dataclass(frozen=True)
class HeldOut:
    """Figures on the held-out utterances."""

    ce: float  # cross-entropy per labelled frame (nats)
    acc: float  # frame accuracy
    frames: int  # labelled frames scored

    def figures(self) -> dict[str, float]:
        return {"heldout_ce": self.ce, "heldout_acc": self.acc}


@torch.no_grad()
def evaluate(model: torch.nn.Module, cfg: TrainConfig, corpus: Corpus, rows: np.ndarray,
             input_dim: int, device: torch.device) -> HeldOut:
    """Score ``model`` (a plain module with ``left_context``/``right_context``) on ``rows`` of
    ``corpus``, read as training reads them (``cfg``'s CMVN, chunking, batch and precision)."""
    reader = UtteranceReader(corpus, cfg.cmvn, cfg.cmvn_norm_vars, input_dim)
    was_training = model.training
    model.eval()
    ce, correct, frames = 0.0, 0, 0
    precision = cfg.precision_on(device)
    try:
        for x, y in heldout_batches(reader, rows, cfg.chunk_len, model.left_context,
                                    model.right_context, cfg.batch_size):
            inputs = torch.from_numpy(x).to(device)
            target = torch.from_numpy(y).to(device).flatten()
            with precision.autocast_context():
                logits = model(inputs)
            batch_ce, batch_correct, batch_frames = frame_scores(logits.flatten(0, 1), target)
            ce, correct, frames = ce + batch_ce, correct + batch_correct, frames + batch_frames
    finally:
        reader.close()
        model.train(was_training)
    return HeldOut(ce / frames, correct / frames, frames)
