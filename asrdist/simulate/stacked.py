"""G models of one architecture run as one computation over a leading learners dimension.

Each parameter of the model is given stacked, ``(G, *shape)``, and each input ``(G, batch,
frames, dim)``; the affine maps and the LSTM's input and recurrent products are batched matrix
products over the G learners (``baddbmm``), so G learners cost a few large kernels instead of
G sets of small ones, on a CPU or a GPU alike. The math is the models' own (``nn.LSTM``'s gate
order i, f, g, o and zero initial state; the DNN's splice): the result equals G separate
forward passes to float tolerance, and autograd through it gives each learner its own gradient
(learners share nothing). Any other model without buffers (the Conformer) is computed by
``torch.func``: its own forward over each learner's parameters (``functional_call``), mapped
over the learners dimension (``vmap``), which batches the same kernels. What cannot be batched
(dropout while training: its random masks would not be the separate models' ones; modules with
hooks or a replaced forward, e.g. NG-SGD's; buffers a forward updates, a batchnorm's running
statistics) is refused by :func:`stackable`, and the caller computes those learners one at a
time.
"""

from __future__ import annotations

import torch
import torch.func
import torch.nn.functional as F
from torch import nn

from asrdist.models.blstm import BLSTM
from asrdist.models.dnn import DNN
from asrdist.train.loss import IGNORE

Params = dict[str, torch.Tensor]  # parameter name -> (G, *shape)


def stackable(model: nn.Module) -> bool:
    """Whether :func:`stacked_logits` computes ``model`` exactly as its own forward does."""
    if type(model) not in (BLSTM, DNN) and any(True for _ in model.buffers()):
        return False
    for m in model.modules():
        if "forward" in vars(m):  # a forward replaced on the instance (NG-SGD's layers)
            return False
        if (m._forward_hooks or m._forward_pre_hooks or m._backward_hooks
                or getattr(m, "_backward_pre_hooks", None)):
            return False
        if m.training and isinstance(m, nn.Dropout) and m.p > 0:
            return False
    return not (isinstance(model, BLSTM) and model.training and model.lstm.dropout > 0
                and model.lstm.num_layers > 1)


def stacked_logits(model: nn.Module, params: Params, feats: torch.Tensor) -> torch.Tensor:
    """(G, batch, context + frames, dim) -> (G, batch, frames, pdfs): ``model``'s forward with
    learner g's parameters ``params[name][g]`` on ``feats[g]``."""
    if isinstance(model, BLSTM):
        return _blstm(model, params, feats)
    if isinstance(model, DNN):
        return _dnn(model, params, feats)
    return torch.func.vmap(lambda p, x: torch.func.functional_call(model, p, (x,)))(params, feats)


def stacked_frame_loss(model: nn.Module, params: Params, feats: torch.Tensor,
                       labels: torch.Tensor) -> torch.Tensor:
    """(G,) per learner: :func:`asrdist.train.loss.frame_loss` of each learner's model."""
    logits = stacked_logits(model, params, feats).float()
    g = logits.shape[0]
    ce = F.cross_entropy(logits.flatten(0, 2), labels.flatten(), ignore_index=IGNORE,
                         reduction="none").view(g, -1)
    kept = (labels != IGNORE).view(g, -1).sum(1)
    return ce.sum(1) / kept


def _affine(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    """(G, ..., in) -> (G, ..., out) with each learner's (out, in) weight."""
    flat = x.reshape(x.shape[0], -1, x.shape[-1])
    wt = weight.transpose(1, 2)
    out = torch.bmm(flat, wt) if bias is None else torch.baddbmm(bias.unsqueeze(1), flat, wt)
    return out.view(*x.shape[:-1], weight.shape[1])


def _dnn(model: DNN, params: Params, feats: torch.Tensor) -> torch.Tensor:
    window = model.left_context + 1 + model.right_context
    h = feats.unfold(2, window, 1).transpose(3, 4).flatten(3)  # as DNN.forward splices
    for name, layer in model.net.named_children():
        if isinstance(layer, nn.Linear):
            bias = params.get(f"net.{name}.bias")
            h = _affine(h, params[f"net.{name}.weight"], bias)
        else:  # an activation (or dropout in eval mode): the same for every learner
            h = layer(h)
    return h


def _blstm(model: BLSTM, params: Params, feats: torch.Tensor) -> torch.Tensor:
    lstm = model.lstm
    g, t = feats.shape[0], feats.shape[2]
    h = feats
    for layer in range(lstm.num_layers):
        # both directions in one recurrence: the reverse one on the time-flipped input,
        # stacked after the forward one along the learners dimension
        def both(kind: str, layer: int = layer) -> torch.Tensor:
            return torch.cat([params[f"lstm.{kind}_l{layer}"],
                              params[f"lstm.{kind}_l{layer}_reverse"]])

        bias = both("bias_ih") + both("bias_hh") if lstm.bias else None
        out = _lstm_layer(torch.cat([h, h.flip(2)]), both("weight_ih"), both("weight_hh"), bias)
        h = torch.cat([out[:g], out[g:].flip(2)], dim=-1)
    h = h[:, :, model.left_context:t - model.right_context]
    if model.bottleneck is not None:
        h = _affine(h, params["bottleneck.weight"], params["bottleneck.bias"])
    return _affine(h, params["output.weight"], params["output.bias"])


def _lstm_layer(x: torch.Tensor, w_ih: torch.Tensor, w_hh: torch.Tensor,
                bias: torch.Tensor | None) -> torch.Tensor:
    """One LSTM direction for G stacked learners: (G, batch, time, in) -> (G, batch, time, H);
    the input products of all time steps in one batched product, then the recurrence."""
    g, batch, steps, _ = x.shape
    units = w_hh.shape[2]
    projected = _affine(x, w_ih, bias).unbind(2)  # (G, batch, 4H) per time step
    w_hh_t = w_hh.transpose(1, 2)
    h = x.new_zeros(g, batch, units)
    c = x.new_zeros(g, batch, units)
    outputs = []
    for step in range(steps):  # split and unbind: one gradient node each, not one per slice
        i, f, cell, o = torch.baddbmm(projected[step], h, w_hh_t).chunk(4, dim=-1)
        c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(cell)
        h = torch.sigmoid(o) * torch.tanh(c)
        outputs.append(h)
    return torch.stack(outputs, dim=2)
