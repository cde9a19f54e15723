"""Make the training optimizer by name: the one place the trainer asks for one."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from asrdist.errors import AsrdistError
from asrdist.optim.ngsgd import NGSGD, NGOptions
from asrdist.options import NON_NEGATIVE, POSITIVE, Options, in_range, option

OPTIMIZERS = ("sgd", "ngsgd", "adamw")
ADAMW_ONLY = ("adamw",)


@dataclass(frozen=True)
class OptimizerOptions(Options):
    """The optimizer's options but the learning rate (the schedule's) and NG-SGD's own
    (:class:`NGOptions`)."""

    optimizer: str = option("sgd", "sgd; ngsgd: Kaldi's online natural-gradient SGD on every "
                            "affine layer (the BLSTM's LSTM weights stay plain SGD); adamw: "
                            "AdamW (Loshchilov & Hutter), the Conformer's; its moments stay "
                            "with each learner under every strategy, checkpointed",
                            OPTIMIZERS)
    momentum: float = option(0.9, "SGD momentum", check=NON_NEGATIVE)
    nesterov: bool = option(False, "Nesterov momentum")
    weight_decay: float = option(0.0, "L2 weight decay (AdamW: decoupled, per unit rate)",
                                 check=NON_NEGATIVE)
    adam_beta1: float = option(0.9, "AdamW: first moment's decay", check=in_range(0, 1),
                               when=("optimizer", ADAMW_ONLY))
    adam_beta2: float = option(0.98, "AdamW: second moment's decay (ESPnet's Conformer: 0.98)",
                               check=in_range(0, 1), when=("optimizer", ADAMW_ONLY))
    adam_eps: float = option(1e-9, "AdamW: added to the second moment's root (ESPnet: 1e-9)",
                             check=POSITIVE, when=("optimizer", ADAMW_ONLY))


def build_optimizer(options: OptimizerOptions, model: nn.Module, lr: float,
                    ng: NGOptions | None = None) -> torch.optim.Optimizer:
    """The optimizer ``options`` name at rate ``lr`` (the schedule's): SGD (``sgd``), AdamW
    (``adamw``) or natural-gradient SGD (``ngsgd``, preconditioning ``model``'s affine layers
    with ``ng``, required then) over ``model``'s parameters; ``model`` is the module the
    learner runs (a strategy's wrapper included), built once before the first step. The one
    builder of asrdist-train's learners and the simulator's."""
    o = options
    sgd = dict(lr=lr, momentum=o.momentum, nesterov=o.nesterov and o.momentum > 0,
               weight_decay=o.weight_decay)
    if o.optimizer == "ngsgd":
        if ng is None:
            raise AsrdistError("--optimizer ngsgd: no NG-SGD options given to the builder")
        return NGSGD(model, ng, **sgd)
    if o.optimizer == "adamw":
        return torch.optim.AdamW(model.parameters(), lr=lr, betas=(o.adam_beta1, o.adam_beta2),
                                 eps=o.adam_eps, weight_decay=o.weight_decay)
    return torch.optim.SGD(model.parameters(), **sgd)
