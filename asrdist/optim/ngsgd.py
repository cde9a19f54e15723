"""NG-SGD: SGD whose affine layers get Kaldi's natural-gradient weight gradient.

As Kaldi's NaturalGradientAffineComponent does, each ``nn.Linear`` gets two online
preconditioners (asrdist.optim.natural_gradient): one for its input rows with a column of
ones appended (so the bias is preconditioned with the weights), one for the derivative of the
loss with respect to its output rows. Every frame of the minibatch is a row. The weight
gradient becomes

    [grad W, grad b] = gamma_in gamma_out * X_out_hat^T [X_in, 1]_hat

The gradient is made once, directly: NGSGD replaces each layer's forward by a custom
autograd function (``_NaturalGradientLinear``) whose backward preconditions the recorded
input and the incoming output derivative and forms the weight and bias gradients from them,
as Kaldi's component does; no plain weight gradient is computed (the hooks of an earlier
version let autograd make one and threw it away). The input's gradient is the plain one.
The gradients reach the parameters as autograd's own, before they are accumulated: a
strategy that averages gradients (ssgd's DDP buckets, hadpsgd) averages the preconditioned
ones, clipping and momentum see them, and every ``--algo`` works unchanged. The
preconditioners run in float32 whatever the autocast dtype of the forward. One backward
per forward, as training does: a layer's input is kept from its forward to its backward.

What is not preconditioned: ``nn.LSTM``'s input and recurrent transforms (their per-step
gate derivatives are inside the fused kernel, out of reach of an affine function); they get
plain SGD, while the BLSTM's bottleneck and output layers get NG-SGD. The DNN is affine
layers only, so all of it is preconditioned.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import nn
from torch.nn import functional as F

from asrdist.errors import AsrdistError
from asrdist.optim.natural_gradient import OnlineNaturalGradient, norm_ratio
from asrdist.options import NON_NEGATIVE, POSITIVE, Options, option


@dataclass(frozen=True)
class NGOptions(Options):
    """Kaldi's NaturalGradientAffineComponent defaults; the options are ``--ng-*``."""

    rank_in: int = option(20, "ngsgd: rank of the Fisher estimate of each layer's input",
                          check=POSITIVE, name="ng_rank_in")
    rank_out: int = option(80, "ngsgd: rank of the Fisher estimate of each layer's output "
                           "derivative", check=POSITIVE, name="ng_rank_out")
    update_period: int = option(4, "ngsgd: minibatches between updates of the Fisher "
                                "estimates (after the first 10)", check=POSITIVE,
                                name="ng_update_period")
    num_samples_history: float = option(2000.0, "ngsgd: time constant of the Fisher "
                                        "estimates, in rows (frames)", check=POSITIVE,
                                        name="ng_num_samples_history")
    alpha: float = option(4.0, "ngsgd: smoothing of the Fisher matrix with the identity",
                          check=NON_NEGATIVE, name="ng_alpha")


class _NaturalGradientLinear(torch.autograd.Function):
    """``F.linear`` whose backward makes the parameters' gradient from the preconditioned
    input and output derivative (and nothing else: no plain weight gradient is formed);
    the input's gradient is the plain one, as the forward is."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None,
                affine: _AffineNG) -> torch.Tensor:
        ctx.affine = affine
        ctx.save_for_backward(weight)
        return F.linear(x, weight, bias)  # under autocast, in its dtype, as nn.Linear

    @staticmethod
    def backward(ctx: Any, grad_out: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        (weight,) = ctx.saved_tensors
        grad_x = grad_out.matmul(weight.to(grad_out.dtype)) if ctx.needs_input_grad[0] else None
        grad_w, grad_b = ctx.affine.gradients(grad_out)
        return grad_x, grad_w, grad_b, None


class _AffineNG:
    """The two preconditioners of one affine layer; the layer's forward is replaced by
    one whose backward gives the preconditioned weight and bias gradients directly."""

    def __init__(self, layer: nn.Linear, options: NGOptions) -> None:
        self.layer = layer
        make = OnlineNaturalGradient
        self.pre_in = make(options.rank_in, options.update_period,
                           options.num_samples_history, options.alpha)
        self.pre_out = make(options.rank_out, options.update_period,
                            options.num_samples_history, options.alpha)
        self.x: torch.Tensor | None = None  # the input of the forward awaiting its backward
        layer.forward = self.forward  # type: ignore[method-assign]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        layer = self.layer
        if not (torch.is_grad_enabled() and layer.weight.requires_grad):
            return F.linear(x, layer.weight, layer.bias)
        self.x = x.detach()
        return _NaturalGradientLinear.apply(x, layer.weight, layer.bias, self)

    def gradients(self, grad_out: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        """(weight, bias) gradients = gamma_in gamma_out X_out_hat^T [X_in, 1]_hat, from the
        recorded input and the derivative ``grad_out`` of the layer's output."""
        if self.x is None:
            raise AsrdistError("--optimizer ngsgd: a second backward through an affine layer "
                               "without a forward in between is not supported")
        x, self.x = self.x, None
        weight, has_bias = self.layer.weight, self.layer.bias is not None
        x_in = x.reshape(-1, x.shape[-1]).float()
        x_out = grad_out.reshape(-1, grad_out.shape[-1]).float()
        with torch.autocast(x_in.device.type, enabled=False):
            in_hat, in_hat_1, traces_in = self.pre_in.precondition_traces(x_in, has_bias)
            out_hat, _, traces_out = self.pre_out.precondition_traces(x_out)
            scale = norm_ratio(torch.stack([traces_in, traces_out]))  # gamma_in gamma_out
            grad_w = out_hat.T.mm(in_hat).mul_(scale)
            grad_b = None if in_hat_1 is None else out_hat.T.mv(in_hat_1).mul_(scale)
        return grad_w.to(weight.dtype), None if grad_b is None else grad_b.to(weight.dtype)

    def state_dict(self) -> dict[str, Any]:
        return {"in": self.pre_in.state_dict(), "out": self.pre_out.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        device = self.layer.weight.device
        self.pre_in.load_state_dict(state["in"], device)
        self.pre_out.load_state_dict(state["out"], device)


class NGSGD(torch.optim.SGD):
    """torch.optim.SGD over ``model``'s parameters, with every ``nn.Linear`` of ``model``
    natural-gradient preconditioned; the preconditioners' state is part of state_dict, so
    a checkpoint resumes them exactly."""

    def __init__(self, model: nn.Module, options: NGOptions, **sgd: Any) -> None:
        super().__init__(model.parameters(), **sgd)
        self.layers = [_AffineNG(m, options) for m in model.modules()
                       if isinstance(m, nn.Linear)]

    def state_dict(self) -> dict[str, Any]:
        out = super().state_dict()
        out["natural_gradient"] = [layer.state_dict() for layer in self.layers]
        return out

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        state = dict(state_dict)
        layers = state.pop("natural_gradient", None)
        if layers is None or len(layers) != len(self.layers):
            raise AsrdistError("--optimizer ngsgd: the checkpoint holds no natural-gradient "
                               f"state for this model's {len(self.layers)} affine layers")
        super().load_state_dict(state)
        for layer, s in zip(self.layers, layers, strict=True):
            layer.load_state_dict(s)
