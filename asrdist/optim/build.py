"""Make the training optimizer by name: the one place the trainer asks for one."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from asrdist.errors import AsrdistError
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


def build_optimizer(options: OptimizerOptions, model: nn.Module, lr: float,
                    ng: NGOptions | None = None) -> torch.optim.Optimizer:
    """The optimizer ``options`` name at rate ``lr`` (the schedule's): SGD (``sgd``) or
    natural-gradient SGD (``ngsgd``, preconditioning ``model``'s affine layers with ``ng``,
    required then) over ``model``'s parameters; ``model`` is the module the learner runs (a
    strategy's wrapper included), built once before the first step. The one builder of
    asrdist-train's learners and the simulator's."""
    o = options
    sgd = dict(lr=lr, momentum=o.momentum, nesterov=o.nesterov and o.momentum > 0,
               weight_decay=o.weight_decay)
    if o.optimizer == "ngsgd":
        if ng is None:
            raise AsrdistError("--optimizer ngsgd: no NG-SGD options given to the builder")
        return NGSGD(model, ng, **sgd)
    return torch.optim.SGD(model.parameters(), **sgd)
