"""streaming-diloco: DiLoCo synced a fragment at a time, its outer steps overlapping inner steps
(Streaming DiLoCo: A. Douillard et al., "Streaming DiLoCo with overlapping communication",
arXiv 2501.18512, 2025).

The parameters (in the module's order) are split into P contiguous fragments of about equal
size (``--stream-fragments``; a BLSTM's are then about its layers), whole tensors each. Every
fragment is DiLoCo of its own (:mod:`asrdist.parallel.strategies.outer`): its own block start w_g
and outer Nesterov momentum (:class:`~asrdist.parallel.strategies.outer.OuterNesterov` on its
slice), blocks of H = ``--avg-period`` local steps, but staggered: fragment p's blocks end after
step k when

    k + 1 >= H  and  (k + 1 - p*H//P) % H == 0

so the fragments sync at different steps, and the bytes of one sync are 1/P of DiLoCo's (the
paper's sequential pattern; no fragment's first block is shorter than H, so with H past the
run's steps nothing syncs, as for diloco). At a block's end the fragment's average is started
and training goes on: ``--stream-delay`` tau steps later (default 1; 0: at once) the mean has
arrived, the fragment's outer step gives its next w_g, and the local fragment, which went on
learning meanwhile, is merged with it::

    w_g   <- OuterNesterov(w_g, mean_i(w_i at the block's end))
    w_loc <- alpha * w_loc + (1 - alpha) * w_g        (--stream-alpha; 0: take w_g)

(default alpha 0: the paper's 0.5 cost 0.14 to 0.17 held-out CE against diloco's 2.01 on the
mini corpus at 8 learners and H = 8, where alpha 0 with tau 1 cost 0.02; asrdist-compare, 2
seeds)

and the next block's outer gradient is taken from that w_g. With one fragment, tau = 0 and
alpha = 0 this is diloco, bit for bit (the same allreduce of the same weights, the same rule,
the same copy). With tau >= 1 the outer step is applied one or more steps late, which the paper
hides communication behind; the "eager" variant (arXiv 2502.12996) would in addition use the
local outer gradient as a stand-in for the late mean, which is not done here.

The average is :meth:`~asrdist.parallel.transport.Transport.start_average_`, waited for tau
steps later (processes: an asynchronous allreduce; the simulator: a meeting whose result is
taken later, so only what the steps did not hide is waiting). Averaging the fragment's weights
is averaging the learners' outer gradients w_g - w_i (w_g is the same on every learner).

Checkpoints: :meth:`sync` (the trainer's, before a checkpoint or an evaluation) waits for the
averages in flight without applying them (the values are those of the uninterrupted run), and
the state holds each fragment's w_g, its momentum and its arrived mean with the step it is due
at, so a resumed run applies it at the same step. Preemption's stop step (``lockstep``: every
H steps) holds for tau <= 1; with a larger tau a learner may be tau - 1 steps past it when it
hears of the stop.

``--compress`` (the paper sends 4-bit outer gradients; :mod:`asrdist.parallel.rules.compress`'s
codecs here): each fragment's update w_i - w_g is sent through the transport's compressed mean
(:class:`~asrdist.parallel.rules.compress.CompressedMean`, a reduce-scatter then an all-gather of
encoded chunks, decoded and summed in fp32), with error feedback of the fragment's own, and the
mean is w_g plus the decoded mean update, as diloco's ``--compress`` takes it (one fragment,
tau 0, alpha 0: diloco --compress bit for bit). It is started as the plain average is
(:meth:`~asrdist.parallel.transport.Transport.start_compressed_mean_`; processes: a
communication thread of its own, :mod:`asrdist.parallel.processes.compress_thread`; the simulator: a
meeting whose result is taken later) and waited for tau steps later, so the compressed
transfer is hidden behind the steps too; the maths and the bytes are those of the blocking
mean, only the waiting changes. :meth:`sync` waits for it as for the plain average.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

import torch

from asrdist.errors import AsrdistError
from asrdist.options import POSITIVE, Check, in_range, option
from asrdist.parallel.registry import StrategySpec, register
from asrdist.parallel.rules.compress import CompressedMean
from asrdist.parallel.rules.weights import unflatten_into, unwrap
from asrdist.parallel.strategies.ma import ModelAveraging
from asrdist.parallel.strategies.outer import DiLoCoOptions, OuterNesterov
from asrdist.parallel.strategy import Learner
from asrdist.parallel.transport import Pending


@dataclass(frozen=True)
class StreamingOptions(DiLoCoOptions):
    stream_fragments: int = option(2, "streaming-diloco: fragments P of the parameters "
                                   "(contiguous, about equal in size), each synced at steps of "
                                   "its own, H/P apart", check=POSITIVE)
    stream_delay: int = option(-1, "streaming-diloco: local steps tau between starting a "
                               "fragment's average and applying its outer step, below "
                               "--avg-period (0 = at once; -1 = 1, or 0 where the period is 1)",
                               check=Check(lambda v: v >= -1, "be -1 or more"))
    stream_alpha: float = option(0.0, "streaming-diloco: on arrival the local fragment becomes "
                                 "alpha*local + (1-alpha)*global (0 = the global)",
                                 check=in_range(0, 1))


def split_fragments(sizes: list[int], parts: int) -> list[range]:
    """``parts`` contiguous runs of the tensors of ``sizes`` elements, none empty, each
    ending at the first tensor that takes the running total to its share p/P of the whole."""
    if not 1 <= parts <= len(sizes):
        raise AsrdistError(f"--stream-fragments {parts}: the model has {len(sizes)} parameter "
                           f"tensors, so 1 to {len(sizes)} fragments")
    total, cum, bounds = sum(sizes), list(itertools.accumulate(sizes)), [0]
    for p in range(1, parts):
        end = next(i + 1 for i, c in enumerate(cum) if c * parts >= p * total)
        bounds.append(min(max(end, bounds[-1] + 1), len(sizes) - (parts - p)))
    bounds.append(len(sizes))
    return [range(a, b) for a, b in zip(bounds, bounds[1:], strict=False)]


def _flat(params: list[torch.nn.Parameter]) -> torch.Tensor:
    return torch.cat([p.detach().reshape(-1) for p in params])


@dataclass
class _InFlight:
    """A fragment's average, started; due: the step after which its outer step is applied."""

    due: int
    mean: torch.Tensor  # the learners' mean of the fragment once landed
    op: Pending | None
    base: torch.Tensor | None = None  # --compress: w_g, to which the mean update is added

    def land(self) -> None:
        """Wait for the average (once); under --compress ``mean`` is then the mean update,
        and becomes w_g plus it."""
        if self.op is not None:
            self.op.wait()
            self.op = None
        if self.base is not None:
            self.mean = self.base + self.mean.to(self.base.dtype)
            self.base = None


class Fragment:
    """One fragment's parameters, phase and DiLoCo state."""

    def __init__(self, params: list[torch.nn.Parameter], phase: int, rule: OuterNesterov,
                 start: torch.Tensor, side: CompressedMean | None) -> None:
        self.params, self.phase, self.rule, self.start = params, phase, rule, start
        self.side = side  # --compress: its compressed mean (the strategy's Compression's)
        self.in_flight: _InFlight | None = None

    def block_ends(self, step: int, period: int) -> bool:
        done = step + 1
        return done >= period and (done - self.phase) % period == 0

    def state_dict(self) -> dict[str, Any]:
        pending = None
        if self.in_flight is not None:
            assert self.in_flight.op is None and self.in_flight.base is None, \
                "sync() before state_dict()"
            pending = {"due": self.in_flight.due, "mean": self.in_flight.mean.clone()}
        return {"start": self.start.clone(), **self.rule.state_dict(), "pending": pending}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        device = self.start.device
        self.start = state["start"].to(device)
        self.rule.load_state_dict({"b": None if state.get("b") is None
                                   else state["b"].to(device)})
        pending = state.get("pending")
        self.in_flight = None if pending is None else _InFlight(
            int(pending["due"]), pending["mean"].to(device), None)


class StreamingDiLoCo(ModelAveraging):
    """See the module docstring. ``averages`` counts the fragments' outer steps."""

    name = "streaming-diloco"

    def __init__(self, learner: Learner, options: StreamingOptions) -> None:
        super().__init__(learner, options)
        delay = min(1, self.avg_period - 1) if options.stream_delay == -1 \
            else options.stream_delay
        if delay >= self.avg_period:
            raise AsrdistError(f"--stream-delay {options.stream_delay}: must be below the "
                               f"averaging period ({self.avg_period} steps), so that a "
                               "fragment's outer step lands before its next block ends")
        self.options = options
        self.delay, self.alpha = delay, options.stream_alpha
        self.fragments: list[Fragment] = []
        self._loaded: dict[str, Any] | None = None

    def wrap_model(self, model: torch.nn.Module) -> torch.nn.Module:
        """The fragments, and their first w_g: the learners' mean of the starting weights (as
        diloco's, in one allreduce)."""
        params = list(unwrap(model).parameters())
        parts = split_fragments([p.numel() for p in params], self.options.stream_fragments)
        start = _flat(params)
        if self.multi:
            self.average([start])
        offset, period = 0, self.avg_period
        for p, run in enumerate(parts):
            mine = params[run.start: run.stop]
            numel = sum(q.numel() for q in mine)
            rule = OuterNesterov(self.options.diloco_lr, self.options.diloco_momentum)
            self.fragments.append(Fragment(mine, p * period // len(parts), rule,
                                           start[offset: offset + numel].clone(),
                                           self.compression.mean(f"fragment{p}")))
            offset += numel
        if self._loaded is not None:
            self.load_state_dict(self._loaded)
        self._start_distance(model)  # not ma's wrap: each fragment's w_g is its reference
        return model

    def after_step(self, model: torch.nn.Module, step: int) -> None:
        """Each fragment whose block ends here starts its average; each whose average is due
        here takes its outer step and merges it (tau = 0: the same step)."""
        for f in self.fragments:
            if f.block_ends(step, self.avg_period):
                f.in_flight = self._start(f, step + self.delay)
            if f.in_flight is not None and f.in_flight.due == step:
                self._arrive(f)

    def _start(self, f: Fragment, due: int) -> _InFlight:
        """Fragment ``f``'s average, started, due at step ``due``: the mean of its weights
        (w_g minus the mean outer gradient), or under ``--compress`` w_g plus the compressed
        mean of the updates w_i - w_g."""
        weights = _flat(f.params)
        if not self.multi:
            return _InFlight(due, weights, None)
        if f.side is None:
            return _InFlight(due, weights, self.comm.start_average_([weights]))
        with torch.no_grad():
            start = f.start.to(weights.device)
            update = (weights - start).float()
            return _InFlight(due, update, self.comm.start_compressed_mean_(update, f.side),
                             start)

    def _arrive(self, f: Fragment) -> None:
        """The fragment's outer step from the learners' mean, and the merge into the local
        fragment."""
        flight, f.in_flight = f.in_flight, None
        assert flight is not None
        flight.land()
        with torch.no_grad():
            mean = flight.mean
            f.start = f.rule.block(f.start.to(mean.device), mean)
            if self.alpha == 0.0:
                merged = f.start
            else:
                merged = _flat(f.params).mul_(self.alpha).add_(f.start, alpha=1.0 - self.alpha)
            unflatten_into(f.params, merged)
        self.averages += 1

    def _wait_in_flight(self) -> None:
        for f in self.fragments:
            if f.in_flight is not None:
                f.in_flight.land()

    def sync(self, model: torch.nn.Module) -> None:
        """Wait for the averages in flight; their outer steps stay due at their steps."""
        self._wait_in_flight()

    def finalize(self, model: torch.nn.Module) -> None:
        """The outer steps still in flight are taken, then the final average (every
        strategy's)."""
        for f in self.fragments:
            if f.in_flight is not None:
                self._arrive(f)
        super().finalize(model)

    def stop_early(self, model: torch.nn.Module) -> None:
        self._wait_in_flight()
        super().stop_early(model)

    def metrics(self) -> dict[str, Any]:
        out = super().metrics()
        out["fragments"] = len(self.fragments)
        out["stream_delay"] = self.delay
        return out

    def state_dict(self) -> dict[str, Any]:
        out = super().state_dict()
        if self.fragments:
            out["fragments"] = [f.state_dict() for f in self.fragments]
        return out

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        saved = state.get("fragments")
        if saved is None:
            return
        if not self.fragments:  # before wrap_model: applied there
            self._loaded = state
            return
        self._loaded = None
        if len(saved) != len(self.fragments):
            raise AsrdistError(f"--stream-fragments {len(self.fragments)}: the checkpoint has "
                               f"{len(saved)} fragments")
        for f, s in zip(self.fragments, saved, strict=True):
            f.load_state_dict(s)


register(StrategySpec(
    "streaming-diloco", StreamingDiLoCo, StreamingOptions,
    "diloco a fragment of the parameters at a time, staggered, each outer step applied "
    "tau steps late (its average overlapping them) and mixed in, Streaming DiLoCo "
    "(Douillard et al. 2025)",
))
