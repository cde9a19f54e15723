"""Feed-forward DNN acoustic model over spliced frames (Kaldi nnet1/nnet2 style)."""

from __future__ import annotations

import torch
from torch import nn


class DNN(nn.Module):
    """Splices ``splice`` frames either side of each frame, then ReLU (or sigmoid, as in
    Kaldi nnet1 and Su & Chen, for RBM pretraining) hidden layers.

    Splicing happens inside the model: the input carries ``splice`` extra frames at each end
    (the data pipeline repeats the edge frames, as Kaldi's splice-feats does), so training
    chunks and whole decoding utterances go through the same code.
    """

    variable_context = False  # its context is its splice window

    def __init__(
        self,
        input_dim: int,
        num_pdfs: int,
        splice: int = 5,
        hidden_layers: int = 6,
        hidden_units: int = 1024,
        dropout: float = 0.0,
        activation: str = "relu",
    ) -> None:
        super().__init__()
        self.left_context = splice
        self.right_context = splice
        width = (2 * splice + 1) * input_dim
        layers: list[nn.Module] = []
        act = {"relu": nn.ReLU, "sigmoid": nn.Sigmoid}[activation]
        for _ in range(hidden_layers):
            layers += [nn.Linear(width, hidden_units), act()]
            if dropout > 0:
                layers.append(nn.Dropout(dropout))
            width = hidden_units
        layers.append(nn.Linear(width, num_pdfs))
        self.net = nn.Sequential(*layers)

    def hidden_affine(self) -> list[nn.Linear]:
        """The hidden layers' affine transforms, input side first (RBM initialisation)."""
        return [m for m in self.net if isinstance(m, nn.Linear)][:-1]

    def forward(self, feats: torch.Tensor, left: int | None = None,
                right: int | None = None) -> torch.Tensor:
        """(batch, frames + 2*splice, input_dim) -> (batch, frames, num_pdfs) logits.

        ``left``/``right``, as the BLSTM takes them, can only be the splice: the window is
        part of the weights."""
        if (left, right) not in ((None, None), (self.left_context, self.right_context)):
            raise ValueError(f"a DNN's context is its splice ({self.left_context}), "
                             f"not {left} left / {right} right")
        window = self.left_context + 1 + self.right_context
        spliced = feats.unfold(1, window, 1)  # (batch, frames, input_dim, window)
        spliced = spliced.transpose(2, 3).flatten(2)  # frame-major, like splice-feats
        return self.net(spliced)
