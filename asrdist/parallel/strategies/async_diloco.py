"""diloco-async: asynchronous DiLoCo, a central outer state and no global barrier.

Async Local-SGD (Liu et al., arXiv 2401.09135) over this project's DiLoCo
(:mod:`asrdist.parallel.strategies.outer`). A central *server* holds the global weights ``w_g`` and
the outer optimizer's state (:class:`AsyncOuter`): learner 0, the *host*, or in an elastic run the
run's store process (see "Where things live"); each learner, at its own pace:

1. starts a block from the global weights it pulled last, ``w_pulled``, and takes ``H_i``
   local steps (its own optimizer and momentum, as in diloco);
2. pushes its pseudo-gradient ``g = w_pulled - w_i`` to the server and pulls the global weights
   as they are once its push is applied, waiting for no other learner; the next block starts
   from them.

The server applies each push as it arrives, in arrival order, with the *delayed Nesterov* step
of Async Local-SGD (our reading of its algorithm). With N = ``--async-buffer`` (0: the number
of learners), c = ``--async-activation`` in [0, 1/N], lr = ``--diloco-lr`` and
mu = ``--diloco-momentum``, at the t-th push overall (t = 1, 2, ...):

    d  = d + g                                   (the pushes since the last momentum update)
    if t % N == 0:   b = mu * b + d / N;  d = 0
                     w_g = w_g - lr * ((1 - c*N + c) * mu * b + g / N)
    else:            w_g = w_g - lr * (c * mu * b + g / N)

Every push moves ``w_g`` by its own ``g / N`` at once; the momentum buffer takes the mean of N
pushes and is applied (with c = 0) only every N pushes, so stale pseudo-gradients are not
multiplied by the momentum one by one. Over N pushes the momentum applied sums to
``mu * b``: with N = 1 it is diloco's outer Nesterov step (``b = mu*b + G``,
``w_g = w_g - lr*(G + mu*b)``), taken at every push.

The learners start from one global ``w_g``: the learners' mean of their starting weights (one
average at ``wrap_model``, loaded into every learner; with one learner its own weights).

Quorum (``--async-quorum Q``, after Decoupled DiLoCo, arXiv 2604.21428, as we read it): the
server holds the pushes instead until Q of them have arrived (from any learners), then takes
diloco's outer Nesterov step on their mean weighted by local steps,
``G = sum_i steps_i * g_i / sum_i steps_i``, ``b = mu*b + G``, ``w_g = w_g - lr*(G + mu*b)``;
a push that does not complete the quorum pulls w_g unchanged. No learner waits for the
quorum. With one learner and Q = 1 it is diloco's outer step.

Speed-following local steps (``--async-follow-speed``, Async Local-SGD's dynamic local
updates): each push reports the seconds since the learner's last pull; the server keeps each
learner's latest seconds per step and gives a learner ``H_i = max(1, round(H * s_min / s_i))``
steps for its next block (``s_min``: the fastest learner's), so a learner k times slower takes
about H / k steps and every block lasts about as long. Off (the default), ``H_i = H``
(``--avg-period`` / ``--avg-frames``, as diloco's blocks).

Compression (``--compress``, the axis every strategy takes): a push sends its pseudo-gradient
encoded, with this learner's error feedback (:class:`asrdist.parallel.rules.compress.ErrorFeedback`,
its residual in the checkpoint), and the server applies the decoded vector; the global weights
come back float32.

Where things live. Fail-stop runs on processes: on learner 0, the *host*, whose server thread
answers pushes over a gloo group of its own (:mod:`asrdist.parallel.processes.outer_link`), the
state on the CPU; a lost learner ends the job. Elastic runs (``--elastic``, real processes): in the
run's store process (:mod:`asrdist.parallel.processes.outer_server`, served over a socket of its
own), which outlives every learner, so any learner, learner 0 included, can be lost: as in the
ADPSGD family it is dropped, the others push on (none ever waits for another's push), and the
run ends with the survivors' average; the learners' mean at the start reaches the store
process once (from the first learner to ask), and each push is applied there with this
module's :class:`AsyncOuter`, one at a time, in arrival order. The simulator models the state
as living on learner 0's node (its pushes are clock events, :mod:`asrdist.simulate.transport`;
learner 0's own pushes cost nothing). Staleness (metric): the pushes of other learners applied
between a learner's pull and its push.

The export is the learners' average, as for every strategy: each learner's weights after its
last step (the global weights it pulled last, plus the steps of its unfinished block, if any).
With one learner this is diloco at K = 1 blocks of H: SGD, and the outer Nesterov step every H
steps.

Checkpoints: each learner saves ``w_pulled``, its block's steps so far and its block length.
Fail-stop: the host also saves the outer state in its own checkpoint. Elastic: the store
process writes it to ``RUN_DIR/outer_state.pt`` (atomically) whenever a learner syncs before
a checkpoint (or a held-out evaluation: the trainer syncs before both),
with a token of the run that the learners keep in their checkpoints; a resumed elastic run
loads it once, and a run dir without it, or with another run's, is a one-line error. One
learner resumes exactly either way. With several, each learner resumes its own block exactly,
but the outer state is one instant's (an asynchronous run has no step at which every learner
stands still): fail-stop, the host's at its own checkpoint, so the pushes applied after it and
before the others' checkpoints are lost; elastic, the state at the last checkpoint any learner
made, so the pushes applied after it are lost, and a learner whose own checkpoint is older than
that pushes again the blocks it pushed in between (they count twice).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from asrdist.errors import AsrdistError
from asrdist.options import NON_NEGATIVE, Check, option
from asrdist.parallel.base import DistributedStrategy
from asrdist.parallel.options import training_option
from asrdist.parallel.registry import StrategySpec, register
from asrdist.parallel.rules.async_outer import AsyncOuter
from asrdist.parallel.rules.weights import flat_params, load_flat
from asrdist.parallel.strategies.outer import DiLoCoOptions
from asrdist.parallel.strategy import Learner
from asrdist.parallel.transport import OuterLink, SavedOuterLink

HOST = 0  # the learner that holds the outer state


class LocalLink:
    """The outer state of a world of one: pushed to directly (no transport, no time)."""

    def __init__(self, state: AsyncOuter) -> None:
        self.state = state

    def push_pull(self, pseudo_grad: torch.Tensor, steps: int,
                  payload: torch.Tensor | None = None) -> tuple[torch.Tensor, int, int]:
        return self.state.push(0, pseudo_grad, steps, 0.0)

    def finish(self) -> None:
        pass


@dataclass(frozen=True)
class AsyncDiLoCoOptions(DiLoCoOptions):
    async_buffer: int = option(0, "diloco-async: delayed Nesterov's N, pushes per momentum "
                               "update (0 = the number of learners)", check=NON_NEGATIVE)
    async_activation: float = option(0.0, "diloco-async: delayed Nesterov's c in [0, 1/N], "
                                     "the share of the momentum applied at every push "
                                     "(0 = only every N pushes)",
                                     check=Check(lambda v: 0.0 <= v <= 1.0, "be in [0, 1]"))
    async_follow_speed: bool = option(False, "diloco-async: each learner's local steps "
                                      "follow its speed (the fastest takes --avg-period, a "
                                      "k times slower one 1/k of it)")
    async_quorum: int = option(0, "diloco-async: hold pushes until Q arrived, then take "
                               "diloco's outer step on their mean weighted by local steps "
                               "(Decoupled DiLoCo's quorum; 0 = every push, delayed Nesterov)",
                               check=NON_NEGATIVE)
    out: str = training_option("", "the run dir, where an elastic run's store process saves "
                               "the outer state")


class AsyncDiLoCo(DistributedStrategy):
    name = "diloco-async"

    def __init__(self, learner: Learner, options: AsyncDiLoCoOptions) -> None:
        super().__init__(learner, options)
        self.options = options
        self.period = options.period()  # H
        self.block = self.period  # this learner's current block length
        self.done = 0  # steps taken in the current block
        self.pulled: torch.Tensor | None = None  # w_pulled
        self.state: AsyncOuter | None = None  # the host's (fail-stop runs, one learner)
        self.link: OuterLink | LocalLink | None = None
        self.saved: SavedOuterLink | None = None  # elastic: the store process's state
        self.step = 0  # steps taken (a checkpoint's, for the saved state)
        self.pushes = 0
        self._model: torch.nn.Module | None = None
        self._own: torch.Tensor | None = None  # this learner's weights before the start

    def wrap_model(self, model: torch.nn.Module) -> torch.nn.Module:
        """Every learner starts from the learners' mean, w_g (one average)."""
        self._model = model
        start = flat_params(model)
        self._own = start.clone()
        if self.multi:  # the default group's average (an elastic run's final group is made
            self.comm.average_([start])  # once, at the end, of the survivors)
            load_flat(model, start)
        self.pulled = start
        o = self.options
        state = AsyncOuter(start.cpu() if self.multi else start, self.world_size, self.period,
                           o.diloco_lr, o.diloco_momentum, o.async_buffer, o.async_activation,
                           o.async_follow_speed, o.async_quorum)
        if self.multi or self.comm.outer_elsewhere:
            self.link = self.comm.outer_server(state, HOST, self.compression.codec)
            if isinstance(self.link, SavedOuterLink):
                self.saved = self.link
            else:
                self.state = state if self.rank == HOST else None
            if self.multi:
                self._start_distance(model)
        else:
            self.state, self.link = state, LocalLink(state)
        return model

    def after_step(self, model: torch.nn.Module, step: int) -> None:
        """At the block's end: push, pull, start the next block from the global weights."""
        self._own = None  # not resumed after all (load_state_dict comes before any step)
        self.done += 1
        if self.done >= self.block:
            assert self.link is not None and self.pulled is not None
            with torch.no_grad():
                local = flat_params(model)
                g, payload = self.pulled - local, None
                sender = self.compression.sender()  # --compress: the push's encoding
                if sender is not None:
                    payload, g = sender.compress(g)
                weights, self.block, stale = self.link.push_pull(g, self.done, payload)
                weights = weights.to(local.device, local.dtype)
                load_flat(model, weights)
            self.pulled, self.done = weights, 0
            self.pushes += 1
            if self.multi:
                self.comm.note_staleness(stale)
        self.step = step + 1
        if self.multi:
            self.comm.note_step(step + 1)

    def sync(self, model: torch.nn.Module) -> None:
        """Elastic: a checkpoint follows, so the store process saves the outer state (a run
        dir is needed: a strategy made outside a run saves nothing)."""
        if self.saved is not None and self.options.out:
            self.saved.save(self.step)

    def _before_final_average(self, model: torch.nn.Module) -> None:
        """Every learner has taken its steps (so made its pushes): the server is told (the
        fail-stop host's ends once every learner has)."""
        if self.link is not None:
            self.link.finish()

    def close(self) -> None:
        """Elastic: a world of one, which has no final average, says it is done here."""
        if self.saved is not None:
            self.saved.finish()
        super().close()

    def lockstep(self) -> tuple[tuple[int, ...], int]:
        """This learner alone: asynchronous learners stop and resume at their own steps."""
        return (self.rank,), 1

    def metrics(self) -> dict[str, Any]:
        out = super().metrics()
        out["pushes"] = self.pushes
        out["block_steps"] = self.block
        out["avg_period"] = self.period
        if not self.options.async_quorum:  # the buffer's N as resolved (0: the learners)
            out["async_buffer"] = self.options.async_buffer or self.world_size
        return out

    def state_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {**super().state_dict(), "done": self.done, "block": self.block,
                               "pushes": self.pushes}
        if self.pulled is not None:
            out["pulled"] = self.pulled.clone()
        if self.state is not None:
            out["outer"] = self.state.state_dict()
        if self.saved is not None:
            out["outer_token"] = self.saved.token
        return out

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """A resumed learner: its own weights (the checkpoint's, which wrap_model replaced by
        the mean), its block, and on the host the outer state (elastic: the store process
        loads it from the run dir)."""
        super().load_state_dict(state)
        self.done, self.block = int(state["done"]), int(state["block"])
        self.pushes = int(state.get("pushes", 0))
        if self._model is not None and self._own is not None:
            load_flat(self._model, self._own)
        if "pulled" in state and self.pulled is not None:
            self.pulled = state["pulled"].to(self.pulled.device)
        if self.saved is not None:
            if "outer_token" not in state:
                raise AsrdistError("--resume --elastic: this diloco-async checkpoint was "
                                   "written by a run without --elastic (its outer state is in "
                                   "learner 0's checkpoint): resume it without --elastic")
            self.saved.load(state["outer_token"])
        elif "outer_token" in state and self.state is not None:
            raise AsrdistError("--resume: this diloco-async checkpoint was written by an "
                               "--elastic run (its outer state is in the run dir's "
                               "outer_state.pt): resume it with --elastic")
        if self.state is not None and "outer" in state:
            self.state.load_state_dict(state["outer"])


register(StrategySpec(
    "diloco-async", AsyncDiLoCo, AsyncDiLoCoOptions,
    "asynchronous DiLoCo: each learner pushes its block's update to a central outer state "
    "and pulls it, no barrier; delayed Nesterov (Async Local-SGD, Liu et al. 2024)",
    elastic=True,
))
