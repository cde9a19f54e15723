"""Bidirectional LSTM acoustic model (IBM / Kaldi hybrid setup): frames in, pdf logits out."""

from __future__ import annotations

import torch
from torch import nn


class BLSTM(nn.Module):
    """Stacked BLSTM, optional linear bottleneck, then a linear layer over the pdfs.

    Trained on fixed-length chunks (IBM: 21 frames) and run on whole utterances when decoding;
    it needs no input context beyond the frames it labels.
    """

    left_context = 0
    right_context = 0

    def __init__(
        self,
        input_dim: int,
        num_pdfs: int,
        layers: int = 4,
        units: int = 512,
        bottleneck: int = 0,
        dropout: float = 0.0,
    ) -> None:
        super().__init__()
        self.lstm = nn.LSTM(
            input_dim,
            units,
            num_layers=layers,
            bidirectional=True,
            batch_first=True,
            dropout=dropout if layers > 1 else 0.0,
        )
        width = 2 * units
        self.bottleneck = nn.Linear(width, bottleneck) if bottleneck > 0 else None
        self.output = nn.Linear(bottleneck if bottleneck > 0 else width, num_pdfs)

    def forward(self, feats: torch.Tensor) -> torch.Tensor:
        """(batch, frames, input_dim) -> (batch, frames, num_pdfs) logits."""
        hidden, _ = self.lstm(feats)
        if self.bottleneck is not None:
            hidden = self.bottleneck(hidden)
        return self.output(hidden)
