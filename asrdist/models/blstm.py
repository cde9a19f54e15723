"""Bidirectional LSTM acoustic model (IBM / Kaldi hybrid setup): frames in, pdf logits out."""

from __future__ import annotations

import torch
from torch import nn


class BLSTM(nn.Module):
    """Stacked BLSTM, optional linear bottleneck, then a linear layer over the pdfs.

    Trained on fixed-length chunks (IBM: 21 frames) with ``left_context``/``right_context``
    extra input frames either side (Kaldi's chunk-left/right-context): the recurrences warm up
    on them and their outputs are dropped, so the chunk's first and last labelled frames are
    not scored by an LSTM that has seen nothing. Decoding runs the same windows
    (asrdist.decode.acoustic, --frames-per-chunk), or other context widths: ``forward`` takes
    them.
    """

    variable_context = True  # any left/right context at inference (Kaldi's extra-*-context)

    def __init__(
        self,
        input_dim: int,
        num_pdfs: int,
        layers: int = 4,
        units: int = 512,
        bottleneck: int = 0,
        dropout: float = 0.0,
        left_context: int = 0,
        right_context: int = 0,
    ) -> None:
        super().__init__()
        self.left_context = left_context
        self.right_context = right_context
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

    def forward(self, feats: torch.Tensor, left: int | None = None,
                right: int | None = None) -> torch.Tensor:
        """(batch, left + frames + right, input_dim) -> (batch, frames, num_pdfs) logits;
        ``left``/``right`` default to the training context."""
        left = self.left_context if left is None else left
        right = self.right_context if right is None else right
        hidden, _ = self.lstm(feats)
        hidden = hidden[:, left:hidden.shape[1] - right]
        if self.bottleneck is not None:
            hidden = self.bottleneck(hidden)
        return self.output(hidden)
