"""Build an acoustic model from its config (asrdist.models.final rebuilds one from final.pt)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from torch import nn

from asrdist.errors import AsrdistError
from asrdist.models.blstm import BLSTM
from asrdist.models.conformer import Conformer
from asrdist.models.dnn import DNN
from asrdist.models.tdnnf import TDNNF
from asrdist.options import NON_NEGATIVE, POSITIVE, Options, in_range, not_taken, option

MODEL_TYPES = ("blstm", "dnn", "conformer", "tdnnf")
CONFORMER_ONLY = ("conformer",)
TDNNF_ONLY = ("tdnnf",)
ACTIVATIONS = ("relu", "sigmoid")


@dataclass(frozen=True)
class ModelConfig(Options):
    """Type and sizes of an acoustic model; stored in final.pt so decoding can rebuild it. The
    options' declarations (asrdist-train's and asrdist-simulate's flags)."""

    type: str = option("blstm", "acoustic model type", MODEL_TYPES, name="model")
    layers: int = option(4, "BLSTM: layers", check=POSITIVE)
    units: int = option(512, "BLSTM: cells per direction", check=POSITIVE)
    bottleneck: int = option(0, "BLSTM: linear bottleneck before the output layer (0 = none)",
                             check=NON_NEGATIVE)
    chunk_left_context: int = option(0, "BLSTM, Conformer: extra input frames before each training "
                                     "chunk, not labelled (Kaldi's chunk-left-context: 40)",
                                     check=NON_NEGATIVE)
    chunk_right_context: int = option(0, "BLSTM, Conformer: extra input frames after each training "
                                      "chunk, not labelled (Kaldi's chunk-right-context: 40)",
                                      check=NON_NEGATIVE)
    splice: int = option(5, "DNN: frames of context either side of each frame",
                         check=NON_NEGATIVE)
    hidden_layers: int = option(6, "DNN: hidden layers (0 = a linear model; RBM "
                                "pretraining needs 1 or more)", check=NON_NEGATIVE)
    hidden_units: int = option(1024, "DNN: units per hidden layer", check=POSITIVE)
    conformer_blocks: int = option(
        4, "Conformer: blocks (ESPnet's SWB-300 Conformer: 12)", check=POSITIVE,
        when=("type", CONFORMER_ONLY))
    attention_dim: int = option(
        144, "Conformer: model width (ESPnet's SWB-300: 256)", check=POSITIVE,
        when=("type", CONFORMER_ONLY))
    attention_heads: int = option(
        4, "Conformer: self-attention heads (the width's divisor)", check=POSITIVE,
        when=("type", CONFORMER_ONLY))
    conv_kernel: int = option(
        15, "Conformer: depthwise convolution kernel, odd (ESPnet's SWB-300: 31)",
        check=POSITIVE, when=("type", CONFORMER_ONLY))
    tdnnf_layers: int = option(
        8, "TDNN-F: factorised layers after the first TDNN layer, time strides 1, 1, 1, 0, "
        "then 3 (Kaldi's run_tdnn_7q: 16)", check=POSITIVE, when=("type", TDNNF_ONLY))
    tdnnf_dim: int = option(
        512, "TDNN-F: layer width (Kaldi's run_tdnn_7q: 1536)", check=POSITIVE,
        when=("type", TDNNF_ONLY))
    tdnnf_bottleneck: int = option(
        128, "TDNN-F: semi-orthogonal bottleneck width (Kaldi's run_tdnn_7q: 160)",
        check=POSITIVE, when=("type", TDNNF_ONLY))
    dropout: float = option(0.0, "dropout between layers (TDNN-F: the peak of Kaldi's schedule, "
                            "0 at the start and end of training)", check=in_range(0, 1))
    activation: str = option("relu", "DNN: hidden activation (sigmoid: Kaldi nnet1, Su & Chen, "
                             "needed by --init-dbn)", ACTIVATIONS)

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.type == "conformer" and self.attention_dim % self.attention_heads:
            raise AsrdistError(f"--attention-dim {self.attention_dim} is not a multiple of "
                               f"--attention-heads {self.attention_heads}")
        if self.type == "conformer" and self.conv_kernel % 2 == 0:
            raise AsrdistError(f"--conv-kernel {self.conv_kernel}: the kernel must be odd, "
                               "centred on its frame")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def identity(self) -> dict[str, Any]:
        """The options that make this model: all but another model type's own."""
        unused = not_taken(self)
        return {k: v for k, v in self.to_dict().items() if k not in unused}


def build_model(config: ModelConfig, input_dim: int, num_pdfs: int) -> nn.Module:
    """A fresh model; it has ``left_context``/``right_context`` (extra input frames it needs)."""
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
    if config.type == "tdnnf":
        return TDNNF(input_dim, num_pdfs, config.tdnnf_layers, config.tdnnf_dim,
                     config.tdnnf_bottleneck, config.dropout)
    if config.type == "conformer":
        return Conformer(
            input_dim, num_pdfs, config.conformer_blocks, config.attention_dim,
            config.attention_heads, config.conv_kernel, config.dropout,
            config.chunk_left_context, config.chunk_right_context,
        )
    return BLSTM(
        input_dim, num_pdfs, config.layers, config.units, config.bottleneck, config.dropout,
        config.chunk_left_context, config.chunk_right_context,
    )
