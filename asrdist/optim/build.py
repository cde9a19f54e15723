"""Make the training optimizer by name: the one place the trainer asks for one."""

from __future__ import annotations

import torch
from torch import nn

from asrdist.optim.ngsgd import NGSGD, NGOptions

OPTIMIZERS = ("sgd", "ngsgd")


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
