"""Build an acoustic model from its config (asrdist.models.final rebuilds one from final.pt)."""

from __future__ import annotations

from dataclasses import Field, asdict, dataclass, field, fields
from typing import Any

from torch import nn

from asrdist.errors import AsrdistError
from asrdist.models.blstm import BLSTM
from asrdist.models.conformer import Conformer
from asrdist.models.dnn import DNN
from asrdist.models.tdnnf import TDNNF
from asrdist.options import NON_NEGATIVE, POSITIVE, Options, flag, in_range, option

MODEL_TYPES = ("blstm", "dnn", "conformer", "tdnnf")
CONFORMER_ONLY = ("conformer",)
TDNNF_ONLY = ("tdnnf",)
ACTIVATIONS = ("relu", "sigmoid")


def model_option(models: tuple[str, ...], default: Any, help: str, **kw: Any) -> Any:
    """An option that only ``models`` take: another model's run leaves it out of what the run
    is (its done marker, --resume, a simulated run's cache key) and warns when it is given. The
    options of the first two models (every BLSTM and DNN option) are on every run, as they
    were before any model had options of its own."""
    declared = option(default, help, **kw)
    return field(default=default, metadata={**declared.metadata, "models": models})


def taken_by(f: Field, model: str) -> bool:
    """Whether model type ``model`` uses option ``f``."""
    return model in f.metadata.get("models", MODEL_TYPES)


def scoped_options() -> tuple[str, ...]:
    """The options declared for some model types only (:func:`model_option`)."""
    return tuple(f.name for f in fields(ModelConfig) if "models" in f.metadata)


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
    conformer_blocks: int = model_option(
        CONFORMER_ONLY, 4, "Conformer: blocks (ESPnet's SWB-300 Conformer: 12)", check=POSITIVE)
    attention_dim: int = model_option(
        CONFORMER_ONLY, 144, "Conformer: model width (ESPnet's SWB-300: 256)", check=POSITIVE)
    attention_heads: int = model_option(
        CONFORMER_ONLY, 4, "Conformer: self-attention heads (the width's divisor)", check=POSITIVE)
    conv_kernel: int = model_option(
        CONFORMER_ONLY, 15, "Conformer: depthwise convolution kernel, odd (ESPnet's SWB-300: 31)",
        check=POSITIVE)
    tdnnf_layers: int = model_option(
        TDNNF_ONLY, 8, "TDNN-F: factorised layers after the first TDNN layer, time strides "
        "1, 1, 1, 0, then 3 (Kaldi's run_tdnn_7q: 16)", check=POSITIVE)
    tdnnf_dim: int = model_option(
        TDNNF_ONLY, 512, "TDNN-F: layer width (Kaldi's run_tdnn_7q: 1536)", check=POSITIVE)
    tdnnf_bottleneck: int = model_option(
        TDNNF_ONLY, 128, "TDNN-F: semi-orthogonal bottleneck width (Kaldi's run_tdnn_7q: 160)",
        check=POSITIVE)
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

    def not_taken(self) -> set[str]:
        """The options this config's model type does not use (see :func:`model_option`)."""
        return {f.name for f in fields(self) if not taken_by(f, self.type)}

    def ignored(self) -> list[str]:
        """Another model's options given a value other than their default, as flags (the
        CLI warns: a config file may serve several models)."""
        return [f"{flag(f.name)} {getattr(self, f.name)}" for f in fields(self)
                if not taken_by(f, self.type) and getattr(self, f.name) != f.default]

    def identity(self) -> dict[str, Any]:
        """The options that make this model: every option but another model's own."""
        unused = self.not_taken()
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
