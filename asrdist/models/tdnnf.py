"""Factorised TDNN (TDNN-F; Povey et al., Interspeech 2018) for the hybrid setup, as Kaldi's
``local/chain/tuning/run_tdnn_7q.sh`` builds it, at the full 10 ms frame rate of the pdf targets.

A ``tdnnf-layer`` with time stride s maps frames x to
``BYPASS * x(t) + dropout(batchnorm(relu(B [z(t), z(t+s)])))`` where ``z(t) = M [x(t-s), x(t)]``
and M is a bottleneck kept semi-orthogonal (its rows orthogonal, all of one length) by Kaldi's
floating-scale update every :data:`CONSTRAIN_EVERY` training steps (:meth:`TDNNF.after_step`,
which the trainer calls, as :meth:`TDNNF.before_step`). The batchnorm has no learned scale or
offset, as Kaldi's; its running statistics are buffers, which the strategies that average
buffers average and the others keep per learner. Dropout is Kaldi's per-dimension continuous
dropout (one scale per dimension and chunk, uniform in [1 - 2p, 1 + 2p]), its proportion
following Kaldi's schedule ``0,0@0.20,p@0.50,0`` over the run.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

BYPASS = 0.66  # Kaldi's bypass-scale
CONSTRAIN_EVERY = 4  # training steps between semi-orthogonal updates (Kaldi: every 4 minibatches)
UPDATE_SPEED = 0.125  # Kaldi's: quadratic convergence near a semi-orthogonal matrix
STRIDES_FIRST = (1, 1, 1, 0)  # run_tdnn_7q's tdnnf2-5; every later layer has stride 3
LATER_STRIDE = 3


def strides(layers: int) -> list[int]:
    """The time stride of each factorised layer, as run_tdnn_7q gives them."""
    return [STRIDES_FIRST[i] if i < len(STRIDES_FIRST) else LATER_STRIDE for i in range(layers)]


def dropout_proportion(peak: float, progress: float) -> float:
    """Kaldi's schedule ``0,0@0.20,peak@0.50,0``: 0 up to 20 % of training, rising linearly to
    ``peak`` at 50 %, falling linearly to 0 at the end."""
    if progress <= 0.2:
        return 0.0
    if progress <= 0.5:
        return peak * (progress - 0.2) / 0.3
    return peak * max(0.0, 1.0 - progress) / 0.5


def constrain_semi_orthogonal(matrix: torch.Tensor) -> None:
    """One step of Kaldi's floating-scale semi-orthogonal update of ``matrix`` in place (as a
    (rows, columns) matrix, the shorter side's vectors made orthogonal with one common length).

    With P = M M^T and alpha^2 = tr(P P) / tr(P) (the scale whose update is orthogonal to M),
    M <- M - 4 (speed / alpha^2) (P - alpha^2 I) M; the speed is halved, then halved again,
    when P's eigenvalues are far apart (tr(P P) dim / tr(P)^2 above 1.02, 1.1)."""
    m = matrix.reshape(matrix.shape[0], -1)
    if m.shape[0] > m.shape[1]:
        m = m.t()
    with torch.no_grad():
        m64 = m.double()
        p = m64 @ m64.t()
        trace_p, trace_pp = p.trace(), (p * p).sum()
        scale2 = trace_pp / trace_p
        ratio = float(trace_pp * p.shape[0] / trace_p ** 2)
        speed = UPDATE_SPEED * (0.5 if ratio > 1.02 else 1.0) * (0.5 if ratio > 1.1 else 1.0)
        p.diagonal().sub_(scale2)
        m.sub_((4.0 * speed / scale2 * (p @ m64)).to(m.dtype))


class ContinuousDropout(nn.Module):
    """Kaldi's dropout-per-dim-continuous: each (sequence, dimension) is scaled by one value
    drawn uniformly from [1 - 2p, 1 + 2p], the same for all its frames (mean 1, so nothing is
    rescaled at test time). ``proportion`` is set by the schedule."""

    def __init__(self) -> None:
        super().__init__()
        self.proportion = 0.0

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (batch, dim, frames)
        if not self.training or self.proportion == 0.0:
            return x
        scale = torch.empty(x.shape[0], x.shape[1], 1, device=x.device, dtype=x.dtype)
        return x * scale.uniform_(1.0 - 2.0 * self.proportion, 1.0 + 2.0 * self.proportion)


class TdnnfLayer(nn.Module):
    """One tdnnf-layer (see the module's docstring); ``stride`` 0 splices nothing."""

    def __init__(self, dim: int, bottleneck: int, stride: int) -> None:
        super().__init__()
        self.stride = stride
        kernel, dilation = (2, stride) if stride else (1, 1)
        self.linear = nn.Conv1d(dim, bottleneck, kernel, dilation=dilation, bias=False)
        self.affine = nn.Conv1d(bottleneck, dim, kernel, dilation=dilation)
        self.norm = nn.BatchNorm1d(dim, affine=False)
        self.dropout = ContinuousDropout()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """(batch, dim, frames) -> (batch, dim, frames - 2 * stride)."""
        y = self.dropout(self.norm(F.relu(self.affine(self.linear(x)))))
        return BYPASS * x[:, :, self.stride:x.shape[2] - self.stride] + y


class TDNNF(nn.Module):
    """run_tdnn_7q's network, cross-entropy side: a TDNN layer over frames t-1..t+1 (relu,
    batchnorm, dropout), the factorised layers, Kaldi's prefinal-layer (affine, relu, batchnorm,
    semi-orthogonal linear down to the bottleneck, batchnorm) and an affine output layer.

    Its context is fixed by its strides, as a DNN's by its splice: the input carries
    ``left_context``/``right_context`` extra frames (edge frames repeated by the data pipeline).
    """

    variable_context = False

    def __init__(self, input_dim: int, num_pdfs: int, layers: int = 8, dim: int = 512,
                 bottleneck: int = 128, dropout: float = 0.0) -> None:
        super().__init__()
        self.peak_dropout = dropout
        self.first = nn.Conv1d(input_dim, dim, 3)
        self.first_norm = nn.BatchNorm1d(dim, affine=False)
        self.first_dropout = ContinuousDropout()
        self.layers = nn.ModuleList(TdnnfLayer(dim, bottleneck, s) for s in strides(layers))
        self.prefinal_affine = nn.Conv1d(dim, dim, 1)
        self.prefinal_norm = nn.BatchNorm1d(dim, affine=False)
        self.prefinal_linear = nn.Conv1d(dim, bottleneck, 1, bias=False)
        self.prefinal_out_norm = nn.BatchNorm1d(bottleneck, affine=False)
        self.output = nn.Linear(bottleneck, num_pdfs)
        self.left_context = self.right_context = 1 + sum(strides(layers))

    def forward(self, feats: torch.Tensor, left: int | None = None,
                right: int | None = None) -> torch.Tensor:
        """(batch, left_context + frames + right_context, input_dim) -> (batch, frames,
        num_pdfs) logits; ``left``/``right`` can only be the network's own context."""
        if (left, right) not in ((None, None), (self.left_context, self.right_context)):
            raise ValueError(f"a TDNN-F's context is its strides' ({self.left_context}), "
                             f"not {left} left / {right} right")
        x = self.first_dropout(self.first_norm(F.relu(self.first(feats.transpose(1, 2)))))
        for layer in self.layers:
            x = layer(x)
        x = self.prefinal_norm(F.relu(self.prefinal_affine(x)))
        x = self.prefinal_out_norm(self.prefinal_linear(x))
        return self.output(x.transpose(1, 2))

    def semi_orthogonal(self) -> list[torch.Tensor]:
        """The weights kept semi-orthogonal: each factorised layer's M, the prefinal linear."""
        return [layer.linear.weight for layer in self.layers] + [self.prefinal_linear.weight]

    def before_step(self, progress: float) -> None:
        """Before a training step, ``progress`` of the run done: the dropout schedule."""
        proportion = dropout_proportion(self.peak_dropout, progress)
        for module in self.modules():
            if isinstance(module, ContinuousDropout):
                module.proportion = proportion

    def after_step(self, step: int) -> None:
        """After training step ``step`` (1-based): every :data:`CONSTRAIN_EVERY` steps the
        semi-orthogonal update (a resumed run keeps the same steps)."""
        if step % CONSTRAIN_EVERY == 0:
            for weight in self.semi_orthogonal():
                constrain_semi_orthogonal(weight.data)
