"""NG-SGD: SGD whose affine layers get Kaldi's natural-gradient weight gradient.

As Kaldi's NaturalGradientAffineComponent does, each ``nn.Linear`` gets two online
preconditioners (asrdist.optim.natural_gradient): one for its input rows with a column of
ones appended (so the bias is preconditioned with the weights), one for the derivative of the
loss with respect to its output rows. Every frame of the minibatch is a row. The weight
gradient becomes

    [grad W, grad b] = gamma_in gamma_out * X_out_hat^T [X_in, 1]_hat

The replacement happens in the parameters' gradient hooks, during backward and before the
gradient is accumulated: a strategy that averages gradients (ssgd's DDP buckets, hadpsgd)
averages the preconditioned ones, clipping and momentum see them, and every ``--algo`` works
unchanged. The preconditioners run in float32 whatever the autocast dtype of the forward.

What is not preconditioned: ``nn.LSTM``'s input and recurrent transforms (their per-step
gate derivatives are inside the fused kernel and never reach a hook); they get plain SGD,
while the BLSTM's bottleneck and output layers get NG-SGD. The DNN is affine layers only,
so all of it is preconditioned.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from asrdist.errors import AsrdistError
from asrdist.optim.natural_gradient import OnlineNaturalGradient
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


class _AffineNG:
    """The two preconditioners of one affine layer and the hooks that feed them."""

    def __init__(self, layer: nn.Linear, options: NGOptions) -> None:
        self.layer = layer
        make = OnlineNaturalGradient
        self.pre_in = make(options.rank_in, options.update_period,
                           options.num_samples_history, options.alpha)
        self.pre_out = make(options.rank_out, options.update_period,
                            options.num_samples_history, options.alpha)
        self.x: torch.Tensor | None = None
        self.g: torch.Tensor | None = None
        self.pending: dict[str, torch.Tensor] = {}
        self.handles = [layer.register_forward_hook(self._forward)]
        self.handles.append(layer.weight.register_hook(lambda g: self._grad("weight", g)))
        if layer.bias is not None:
            self.handles.append(layer.bias.register_hook(lambda g: self._grad("bias", g)))

    def _forward(self, module: nn.Module, inputs: tuple[torch.Tensor, ...],
                 output: torch.Tensor) -> None:
        if not (torch.is_grad_enabled() and output.requires_grad):
            return
        self.x, self.pending = inputs[0].detach(), {}
        output.register_hook(self._output_grad)

    def _output_grad(self, g: torch.Tensor) -> None:
        self.g = g.detach()

    def _grad(self, name: str, plain: torch.Tensor) -> torch.Tensor:
        """The preconditioned gradient of ``name`` (both are made on the first call)."""
        if not self.pending:
            if self.x is None or self.g is None:
                return plain  # a gradient without a recorded forward: leave it alone
            self.pending = self._preconditioned()
            self.x = self.g = None
        return self.pending.pop(name).to(plain.dtype)

    def _preconditioned(self) -> dict[str, torch.Tensor]:
        assert self.x is not None and self.g is not None
        x_in = self.x.reshape(-1, self.x.shape[-1]).float()
        has_bias = self.layer.bias is not None
        if has_bias:
            x_in = torch.cat([x_in, x_in.new_ones(len(x_in), 1)], dim=1)
        x_out = self.g.reshape(-1, self.g.shape[-1]).float()
        with torch.autocast(x_in.device.type, enabled=False):
            in_hat, gamma_in = self.pre_in.precondition(x_in)
            out_hat, gamma_out = self.pre_out.precondition(x_out)
            grad = (gamma_in * gamma_out) * (out_hat.T @ in_hat)
        if has_bias:
            return {"weight": grad[:, :-1], "bias": grad[:, -1]}
        return {"weight": grad}

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
