"""The gradient noise scale B_simple = tr(Sigma) / |G|^2 (McCandlish, Kaplan, Amodei et al.,
"An Empirical Model of Large-Batch Training", arXiv:1812.06162), measured during training.

The paper's critical batch: below B_simple, doubling the batch nearly halves the steps to a
given loss; above it, larger batches mostly waste compute. Its appendix A.1 estimates both
terms without bias from the squared norms of the gradient at two batch sizes, since a batch of
B examples drawn independently gives E|G_B|^2 = |G|^2 + tr(Sigma) / B:

    |G|^2     ~ (B_big |G_big|^2 - B_small |G_small|^2) / (B_big - B_small)
    tr(Sigma) ~ (|G_small|^2 - |G_big|^2) / (1 / B_small - 1 / B_big)

and smooths each with an exponential moving average before taking the ratio (a single pair of
norms is far too noisy: either estimate can come out negative).

How the trainer gets the two sizes (:class:`NoiseProbe`): N learners stepping together with
local batches b each give B_small = b (the mean of their local squared norms) and B_big = N b
(the norm of their averaged gradient: one allreduce); a learner on its own, or one of
asynchronous learners (each stops at its own step: a collective could wait on one that has
stopped), splits its batch
in two halves (B_small = b/2, B_big = b). Learners that step together but average weights only
now and then (ma) take their local gradients at weights that differ a little: the average is
then that of N nearby points, as their own next average will be. The gradients are taken on
a copy of the model at the step's weights, with the random state put back afterwards, so the
run trains exactly as it would without the measurement: no strategy hook, DDP bucket or NG-SGD
preconditioner sees it.
Examples are chunks; the gradient is that of the plain loss (before any preconditioning).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

from asrdist.data.dataset import IGNORE
from asrdist.parallel.transport import Transport

DECAY = 0.9  # of the moving averages, per measurement (about the last ten count)

LossFn = Callable[[torch.nn.Module, torch.Tensor, torch.Tensor], torch.Tensor]


def estimate(small_sq: float, big_sq: float, b_small: float, b_big: float) -> tuple[float, float]:
    """Unbiased (|G|^2, tr(Sigma)) from the squared gradient norms at two batch sizes."""
    if not 0 < b_small < b_big:
        raise ValueError(f"noise scale: need 0 < B_small < B_big, got {b_small}, {b_big}")
    g_sq = (b_big * big_sq - b_small * small_sq) / (b_big - b_small)
    trace = (small_sq - big_sq) / (1 / b_small - 1 / b_big)
    return g_sq, trace


class NoiseScale:
    """The moving averages of |G|^2 and tr(Sigma), and their ratio B_simple.

    The averages are bias-corrected as Adam's are (divided by 1 - decay^n), so the first
    records are not pulled towards zero; the ratio is the same either way."""

    def __init__(self, decay: float = DECAY) -> None:
        self.decay = decay
        self.count = 0
        self.g_sq = 0.0
        self.trace = 0.0

    def update(self, small_sq: float, big_sq: float, b_small: float,
               b_big: float) -> dict[str, float | None]:
        """Add one measurement; returns it with the smoothed terms and B_simple (None while
        the smoothed |G|^2 is not positive: no critical batch can be told yet)."""
        g_sq, trace = estimate(small_sq, big_sq, b_small, b_big)
        self.count += 1
        self.g_sq = self.decay * self.g_sq + (1 - self.decay) * g_sq
        self.trace = self.decay * self.trace + (1 - self.decay) * trace
        debias = 1 - self.decay ** self.count
        smooth_g, smooth_trace = self.g_sq / debias, self.trace / debias
        return {
            "b_small": b_small, "b_big": b_big, "grad_sq_small": small_sq,
            "grad_sq_big": big_sq, "grad_sq": smooth_g, "trace_sigma": smooth_trace,
            "b_simple": smooth_trace / smooth_g if smooth_g > 0 else None,
        }

    def state_dict(self) -> dict[str, Any]:
        return {"decay": self.decay, "count": self.count, "g_sq": self.g_sq,
                "trace": self.trace}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.decay, self.count = state["decay"], state["count"]
        self.g_sq, self.trace = state["g_sq"], state["trace"]


def flat_gradient(model: torch.nn.Module, loss: torch.Tensor) -> torch.Tensor:
    """The gradient of ``loss`` over ``model``'s trainable parameters as one float32 vector,
    without touching their ``.grad``."""
    params = [p for p in model.parameters() if p.requires_grad]
    grads = torch.autograd.grad(loss, params, allow_unused=True)
    return torch.cat([(torch.zeros_like(p) if g is None else g).detach().float().flatten()
                      for p, g in zip(params, grads, strict=True)])


def halves_norms(model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor,
                 loss_fn: LossFn) -> tuple[float, float, float, float]:
    """(|G_small|^2, |G_big|^2, B_small, B_big) of one batch split in two halves.

    The loss is a mean over labelled frames, so the whole batch's gradient is the halves'
    gradients weighted by their labelled frames w_j; the halves' mean squared norm has
    expectation |G|^2 + tr(Sigma) (1/b_1 + 1/b_2) / 2 and the weighted sum's
    |G|^2 + tr(Sigma) (w_1^2/b_1 + w_2^2/b_2): the two effective batch sizes."""
    half = len(x) // 2
    grads, weights, sizes = [], [], []
    for rows in (slice(0, half), slice(half, None)):
        grads.append(flat_gradient(model, loss_fn(model, x[rows], y[rows])))
        weights.append(float((y[rows] != IGNORE).sum()))
        sizes.append(len(x[rows]))
    w = [v / sum(weights) for v in weights]
    big = w[0] * grads[0] + w[1] * grads[1]
    small_sq = sum(float(g.square().sum()) for g in grads) / 2
    b_small = 2 / sum(1 / b for b in sizes)
    b_big = 1 / sum(wj * wj / b for wj, b in zip(w, sizes, strict=True))
    return small_sq, float(big.square().sum()), b_small, b_big


def across_norms(grads: Sequence[torch.Tensor],
                 sizes: Sequence[int]) -> tuple[float, float, float, float]:
    """(|G_small|^2, |G_big|^2, B_small, B_big) of N local gradients of batches ``sizes``
    averaged with equal weights (as SSGD averages them): E of the mean local squared norm is
    |G|^2 + tr(Sigma) mean(1/b_i), of the average's |G|^2 + tr(Sigma) mean(1/b_i) / N."""
    n = len(grads)
    small_sq = sum(float(g.square().sum()) for g in grads) / n
    big = torch.stack(list(grads)).mean(0)
    inv = sum(1 / b for b in sizes) / n
    return small_sq, float(big.square().sum()), 1 / inv, n / inv


class NoiseProbe:
    """Measures B_simple every ``every`` steps for the trainer (see the module docstring).

    ``twin`` is a model of the same configuration, used only for the measurement; ``across``,
    the transport of a learner that steps together with all the others: the local gradients
    are averaged across them (a collective, on every learner at the same steps); None: the
    batch is split in halves."""

    def __init__(self, twin: torch.nn.Module, every: int, across: Transport | None,
                 device: torch.device) -> None:
        self.twin, self.every, self.across, self.device = twin, every, across, device
        self.noise = NoiseScale()

    def due(self, step: int) -> bool:
        return step % self.every == 0

    def measure(self, model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor,
                loss_fn: LossFn) -> dict[str, float | None] | None:
        """One measurement at ``model``'s weights on its batch (x, y); None when a lone
        learner's batch has fewer than two chunks."""
        if not self.across and len(x) < 2:
            return None
        self.twin.load_state_dict(model.state_dict())
        self.twin.train(model.training)
        devices = [self.device] if self.device.type == "cuda" else []
        with torch.random.fork_rng(devices=devices):
            if self.across:
                norms = self._across(self.across, x, y, loss_fn)
            else:
                norms = halves_norms(self.twin, x, y, loss_fn)
        return self.noise.update(*norms)

    def _across(self, comm: Transport, x: torch.Tensor, y: torch.Tensor,
                loss_fn: LossFn) -> tuple[float, float, float, float]:
        """One average of [g_i, |g_i|^2, 1/b_i] gives the average gradient, the mean local
        squared norm and the mean inverse batch."""
        g = flat_gradient(self.twin, loss_fn(self.twin, x, y))
        extra = torch.tensor([float(g.square().sum()), 1 / len(x)], device=g.device)
        packed = torch.cat([g, extra])
        comm.average_all_([packed])
        small_sq, inv = float(packed[-2]), float(packed[-1])
        big_sq = float(packed[:-2].square().sum())
        return small_sq, big_sq, 1 / inv, comm.world_size / inv

    def state_dict(self) -> dict[str, Any]:
        return self.noise.state_dict()

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.noise.load_state_dict(state)
