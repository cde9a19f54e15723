"""Make the training optimizer by name: the one place the trainer asks for one."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from asrdist.optim.ngsgd import NGSGD, NGOptions
from asrdist.options import NON_NEGATIVE, Options, option

OPTIMIZERS = ("sgd", "ngsgd")


@dataclass(frozen=True)
class OptimizerOptions(Options):
    """The optimizer's options but the learning rate (the schedule's) and NG-SGD's own
    (:class:`NGOptions`)."""

    optimizer: str = option("sgd", "sgd, or ngsgd: Kaldi's online natural-gradient SGD on "
                            "every affine layer (the BLSTM's LSTM weights stay plain SGD)",
                            OPTIMIZERS)
    momentum: float = option(0.9, "SGD momentum", check=NON_NEGATIVE)
    nesterov: bool = option(False, "Nesterov momentum")
    weight_decay: float = option(0.0, "L2 weight decay", check=NON_NEGATIVE)


def build_optimizer(
    name: str,
    model: nn.Module,
    lr: float,
    momentum: float,
    nesterov: bool,
    weight_decay: float,
    ng: NGOptions,
) -> torch.optim.Optimizer:
    """SGD (``sgd``) or natural-gradient SGD (``ngsgd``, preconditioning ``model``'s affine
    layers) over ``model``'s parameters; ``model`` is the module the trainer runs (a
    strategy's wrapper included), built once before the first step."""
    sgd = dict(lr=lr, momentum=momentum, nesterov=nesterov and momentum > 0,
               weight_decay=weight_decay)
    if name == "ngsgd":
        return NGSGD(model, ng, **sgd)
    return torch.optim.SGD(model.parameters(), **sgd)
