"""The frame-level cross-entropy over labelled frames (IGNORE marks a chunk's unlabelled
context): one definition for the trainer, the held-out evaluation and the simulator."""

from __future__ import annotations

import torch
from torch.nn import functional as F

from asrdist.data.dataset import IGNORE


def frame_loss(model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy per labelled frame of a sequence model's logits (batch, frames,
    pdfs): the training loss, the trainer's and the simulator's."""
    logits = model(x)
    return F.cross_entropy(logits.float().flatten(0, 1), y.flatten(), ignore_index=IGNORE)


def frame_scores(logits: torch.Tensor, target: torch.Tensor) -> tuple[float, int, int]:
    """Summed cross-entropy, correct frames and labelled frames of (frames, pdfs) logits."""
    keep = target != IGNORE
    logits, target = logits[keep].float(), target[keep]
    ce = F.cross_entropy(logits, target, reduction="sum").item()
    return ce, int((logits.argmax(-1) == target).sum()), int(keep.sum())
