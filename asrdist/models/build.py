"""Build an acoustic model from its config (asrdist.models.final rebuilds one from final.pt)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from torch import nn

from asrdist.errors import AsrdistError
from asrdist.models.blstm import BLSTM
from asrdist.models.dnn import DNN

MODEL_TYPES = ("blstm", "dnn")
ACTIVATIONS = ("relu", "sigmoid")


@dataclass
class ModelConfig:
    """Type and sizes of an acoustic model; stored in final.pt so decoding can rebuild it."""

    type: str = "blstm"
    layers: int = 4  # BLSTM layers
    units: int = 512  # BLSTM cells per direction
    bottleneck: int = 0  # BLSTM linear bottleneck before the output layer; 0 = none
    chunk_left_context: int = 0  # BLSTM: extra input frames before each chunk (outputs dropped)
    chunk_right_context: int = 0  # BLSTM: extra input frames after each chunk
    splice: int = 5  # DNN: frames of context either side
    hidden_layers: int = 6  # DNN
    hidden_units: int = 1024  # DNN
    dropout: float = 0.0
    activation: str = "relu"  # DNN hidden units: relu, or sigmoid (RBM-pretrainable)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def build_model(config: ModelConfig, input_dim: int, num_pdfs: int) -> nn.Module:
    """A fresh model; it has ``left_context``/``right_context`` (extra input frames it needs)."""
    if config.type == "blstm":
        return BLSTM(
            input_dim, num_pdfs, config.layers, config.units, config.bottleneck, config.dropout,
            config.chunk_left_context, config.chunk_right_context,
        )
    if config.type == "dnn":
        return DNN(
            input_dim,
            num_pdfs,
            config.splice,
            config.hidden_layers,
            config.hidden_units,
            config.dropout,
            config.activation,
        )
    choices = ", ".join(MODEL_TYPES)
    raise AsrdistError(f"unknown model type {config.type!r}; choose one of {choices}")
