"""Outer optimizers over periodic model averaging: ``bmuf`` and ``diloco``.

Both are ``ma`` with a step on top. Every learner takes K local steps (a *block*: ``ma``'s
``--avg-period`` / ``--avg-frames``) from the block's start weights ``w_g``, all of them the
same; then the learners average their weights (ma's allreduce, so the mean is bit for bit
ma's), and the block's averaged update ``G = w_g - mean_i(w_i)`` drives an outer optimizer
whose result is the next block's start, on every learner alike:

- ``bmuf``, blockwise model-update filtering (Chen & Huo, ICASSP 2016), as CNTK's
  BlockMomentumSGD computes it: with ``S = sum_i (w_g - w_i) = N * G`` (CNTK allreduces the
  learners' block updates as a sum),

      v   = eta * v + (1 - eta) * zeta * S
      w   = w_g - v
      w_g = w - eta * v      (Nesterov, the default; classic: w_g = w)

  With the defaults eta = 1 - 1/N and zeta = 1 the increment is ``zeta * G`` (the first block
  is plain ``ma``), and the steady state ``zeta / (1 - eta) = N`` times G is Kaldi's averaging
  with learners x lr, filtered. fairseq's ``bmuf.py`` averages (divides by N before its
  allreduce) and drops the ``1 - eta``: the same step only at eta = 1 - 1/N. This module follows
  CNTK, whose scale the paper's defaults assume. As in CNTK (and fairseq), the Nesterov form
  starts the next block from the look-ahead point and that point is the next block's ``w_g``,
  the base of its ``w = w_g - v``; the paper, as we read it, keeps the model
  ``W(t) = W(t-1) + Delta(t)`` apart from the look-ahead start ``W_g(t)``, which differs from
  the second block on.
  A consequence of CNTK's form: its Nesterov step ``(1 + eta) * v`` obeys the classic
  recursion with ``zeta * (1 + eta)``, so ``--bmuf-nesterov`` changes the settled step (by
  1 + eta) and not the kind of filter; tune zeta with it in mind.
- ``diloco`` (Douillard et al. 2023, arXiv 2311.08105): G taken as a gradient by an outer SGD
  with Nesterov momentum (torch.optim.SGD's form, dampening 0):

      b   = mu * b + G
      w_g = w_g - lr_out * (G + mu * b)

  defaults lr_out = 0.7, mu = 0.9. The sign: the learners moved from w_g to the mean, so G
  points from the mean back to w_g and is *subtracted* (torchft's first version added it, PR
  #233). With lr_out = 1 and mu = 0 the next start is the mean: plain ``ma``, bit for bit (the
  code writes ``w_g - s`` as ``mean + (G - s)``, which is the mean itself when s = G).

The outer state (w_g and v or b) is in the strategy's state_dict, so a checkpoint taken inside
a block resumes exactly. The first block's w_g is the learners' mean of the starting weights
(they may start apart; the model is not changed). With one learner nothing happens: plain SGD
bit for bit, as every strategy (DiLoCo's outer step on one learner, Lookahead, is not taken).
The final export is the learners' average, as for every strategy: a run that ends on a block
boundary exports the next block's start.

The update rules (:class:`BlockMomentum`, :class:`OuterNesterov`) hold no communication: they
map (w_g, mean) to the next w_g.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from asrdist.options import POSITIVE, Check, in_range, option
from asrdist.parallel.registry import StrategySpec, register
from asrdist.parallel.rules.update import averaging_due
from asrdist.parallel.rules.weights import flat_params, load_flat
from asrdist.parallel.strategies.ma import MAOptions, ModelAveraging
from asrdist.parallel.strategy import Learner

# -- the rules ----------------------------------------------------------------------------------


class BlockMomentum:
    """BMUF's filter for ``learners`` learners (see the module docstring); ``momentum`` None
    is eta = 1 - 1/N."""

    def __init__(self, learners: int, momentum: float | None = None, block_lr: float = 1.0,
                 nesterov: bool = True) -> None:
        self.learners = learners
        self.momentum = 1.0 - 1.0 / learners if momentum is None else momentum
        self.block_lr = block_lr
        self.nesterov = nesterov
        self.v: torch.Tensor | None = None

    def block(self, start: torch.Tensor, mean: torch.Tensor) -> torch.Tensor:
        """The next block's start from this one's ``start`` (w_g) and the learners' ``mean``."""
        eta = self.momentum
        g = start - mean  # G; the learners' summed update is N * G
        if self.v is None:
            self.v = torch.zeros_like(start)
        self.v.mul_(eta).add_(g, alpha=(1.0 - eta) * self.block_lr * self.learners)
        w = mean + (g - self.v)  # w_g - v
        if self.nesterov:
            w.sub_(self.v, alpha=eta)
        return w

    def state_dict(self) -> dict[str, Any]:
        return {"v": None if self.v is None else self.v.clone()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.v = state.get("v")


class OuterNesterov:
    """DiLoCo's outer SGD with Nesterov momentum on G (see the module docstring)."""

    def __init__(self, lr: float = 0.7, momentum: float = 0.9) -> None:
        self.lr, self.momentum = lr, momentum
        self.b: torch.Tensor | None = None

    def block(self, start: torch.Tensor, mean: torch.Tensor) -> torch.Tensor:
        """The next block's start from this one's ``start`` (w_g) and the learners' ``mean``."""
        g = start - mean  # the outer gradient G
        if self.b is None:
            self.b = torch.zeros_like(start)
        self.b.mul_(self.momentum).add_(g)
        step = g + self.momentum * self.b
        return mean + (g - self.lr * step)  # w_g - lr * step

    def state_dict(self) -> dict[str, Any]:
        return {"b": None if self.b is None else self.b.clone()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.b = state.get("b")


Rule = BlockMomentum | OuterNesterov

# -- the strategies -----------------------------------------------------------------------------


class OuterAveraging(ModelAveraging):
    """``ma``'s blocks with an outer ``rule`` taking each block's average to the next start."""

    def __init__(self, learner: Learner, options: MAOptions, rule: Rule) -> None:
        super().__init__(learner, options)
        self.rule = rule
        self.start: torch.Tensor | None = None  # w_g

    def wrap_model(self, model: torch.nn.Module) -> torch.nn.Module:
        # the first block's w_g: the mean of the starting weights (a resumed run's checkpoint
        # replaces it in load_state_dict)
        start = flat_params(model)
        if self.multi:
            self.average([start])
        self.start = start
        if self.compression.active:  # --compress: the block's updates are sent from w_g
            self.compression.reference = start
        return super().wrap_model(model)

    def after_step(self, model: torch.nn.Module, step: int) -> None:
        """The block's average (as ma), then the outer step, with one learner too: the outer
        optimizer alone (diloco at K = 1 is a Nesterov look-ahead over SGD, the control that
        splits a gain between the distribution and the outer optimizer)."""
        super().after_step(model, step)
        if not averaging_due(step, self.avg_period):
            return
        if not self.multi:
            self.averages += 1  # a block ended: with one learner its mean is its weights
        with torch.no_grad():
            mean = flat_params(model)
            assert self.start is not None
            self.start = self.rule.block(self.start.to(mean.device), mean)
            load_flat(model, self.start)
            if self.compression.active:
                self.compression.reference = self.start

    def state_dict(self) -> dict[str, Any]:
        out = super().state_dict()
        if self.start is not None:
            out["outer"] = {"start": self.start.clone(), **self.rule.state_dict()}
        return out

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        outer = state.get("outer")
        if outer is not None:
            device = self.start.device if self.start is not None else outer["start"].device
            self.start = outer["start"].to(device)
            self.rule.load_state_dict({k: None if v is None else v.to(device)
                                       for k, v in outer.items() if k != "start"})


# -- bmuf ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class BMUFOptions(MAOptions):
    bmuf_momentum: float = option(-1.0, "bmuf: block momentum eta in [0, 1) "
                                  "(-1 = 1 - 1/N, CNTK's default)",
                                  check=Check(lambda v: v == -1.0 or 0.0 <= v < 1.0,
                                              "be in [0, 1) or -1 (1 - 1/N)"))
    bmuf_lr: float = option(1.0, "bmuf: block learning rate zeta (CNTK's scale: the "
                            "learners' updates summed, times 1 - eta)", check=POSITIVE)
    bmuf_nesterov: bool = option(True, "bmuf: Nesterov block momentum (the next block starts "
                                 "from w - eta*v), else classic")


class BMUF(OuterAveraging):
    name = "bmuf"

    def __init__(self, learner: Learner, options: BMUFOptions) -> None:
        momentum = None if options.bmuf_momentum == -1.0 else options.bmuf_momentum
        super().__init__(learner, options, BlockMomentum(
            learner.world_size, momentum, options.bmuf_lr, options.bmuf_nesterov))

    def metrics(self) -> dict[str, Any]:
        out = super().metrics()
        out["block_momentum"] = self.rule.momentum
        return out


register(StrategySpec(
    "bmuf", BMUF, BMUFOptions,
    "ma with block momentum over the averaged update, BMUF (Chen & Huo 2016; CNTK's scale)",
))

# -- diloco -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class DiLoCoOptions(MAOptions):
    diloco_lr: float = option(0.7, "diloco: outer learning rate", check=POSITIVE)
    diloco_momentum: float = option(0.9, "diloco: outer Nesterov momentum (0 = outer SGD)",
                                    check=in_range(0, 1))


class DiLoCo(OuterAveraging):
    name = "diloco"

    def __init__(self, learner: Learner, options: DiLoCoOptions) -> None:
        super().__init__(learner, options,
                         OuterNesterov(options.diloco_lr, options.diloco_momentum))


register(StrategySpec(
    "diloco", DiLoCo, DiLoCoOptions,
    "ma with an outer Nesterov SGD step on the averaged update, DiLoCo (Douillard et al. 2023)",
))
