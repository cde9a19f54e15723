"""adpsgd-fixed, -random, -delay1, -delayavg: asynchronous decentralized parallel SGD.

No global collective in the steady state: each learner only averages pairwise with one ring
neighbour per exchange, through its transport's exchange (on processes the communication thread
of :mod:`asrdist.parallel.processes.exchange`; in the simulator a pair of clock events).

Plain variants (fixed, random ring), Lian et al.'s step for learner i at its step k::

    snapshot = w_k;  g = grad(snapshot)            # the exchange of w_k runs meanwhile
    w_i, w_j <- (w_i + w_j) / 2                    # merged before the optimizer step
    w_{k+1} = avg_k(w_k) - lr * g(w_k)              # optimizer step, momentum local

The active learner's exchange starts at ``before_step`` and overlaps forward and backward; it
is merged at ``after_backward``, waiting only if it took longer than the gradient. A passive
learner serves exchanges at any time and merges what it received at ``after_backward``.

delay1 (delay-by-one), the project's reading of Cui et al. (TASLP'21, ICASSP'20)::

    w_{k+1} = avg_k(w_k) - lr * g(w_{k-1})

Step k's exchange starts at ``before_step(k)`` and need only finish by ``before_step(k+1)``: it
overlaps the whole step (forward, backward, optimizer step, data loading), and the gradient
applied at step k is the one computed at step k-1 -- exactly one step late, never more (the
first step applies none).

delayavg (averaging one step late, the other reading of "delay-by-one", as in DaSGD and
Overlap-Local-SGD; see bench/readings/delay1_mixing.md for why it is here)::

    w_{k+1} = w_k + delta_{k-1} - lr * g(w_k)

Step k's exchange overlaps the whole step exactly as delay1's does and is merged at
``before_step(k+1)`` (delta_{k-1}: the pairwise average's delta of the snapshot of w_{k-1}),
but the gradient is fresh: computed on the snapshot taken after that merge, applied at once.

``sync`` (before a checkpoint or an evaluation) merges what is in flight, so the saved weights
and the saved ``merged`` count include it.

Staleness (metric): the number of averaging updates merged into the weights between the
snapshot a gradient was computed on and that gradient's application.

Elastic runs (``--elastic``, real processes; :mod:`asrdist.parallel.processes.membership`): a
learner that dies or freezes past ``--exchange-timeout`` is dropped by the survivors. At its next
step boundary every survivor sees the ring lose a member: it retires its exchange (what that one
still receives is merged at the next merge) and builds the ring again over the survivors, each
keeping its role where it can (:func:`~asrdist.parallel.rules.rings.keeping_roles`: the passive and
active survivors interleaved; numbered in rank order instead, every learner after a lost one
would change role, and at 64 simulated learners half the exchanges after a loss never
happened), the round counter going on. Every survivor computes the same ring from the same
list, so the fixed ring re-forms its bipartite pairs and the random ring draws over the
survivors with no further message. The run ends with the
survivors' average.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from asrdist.options import option
from asrdist.parallel.base import DistributedStrategy
from asrdist.parallel.options import CompressOptions
from asrdist.parallel.registry import StrategySpec, register
from asrdist.parallel.rules import rings, update
from asrdist.parallel.rules.staging import DeviceStaging
from asrdist.parallel.rules.weights import unwrap
from asrdist.parallel.strategy import Learner
from asrdist.parallel.transport import Exchange


@dataclass(frozen=True)
class Variant:
    """What an ADPSGD variant does: its ring, whether step k's exchange is merged only at
    step k+1's start (overlapping the whole step), and whether the gradient applied at step k
    is step k-1's (:class:`asrdist.parallel.rules.update.DelayByOne`)."""

    ring: str
    late_merge: bool = False
    delay_grad: bool = False


# --algo adpsgd-<name> and --hadpsgd-variant <name>
VARIANTS = {
    "fixed": Variant("fixed"),
    "random": Variant("random"),
    "delay1": Variant("fixed", late_merge=True, delay_grad=True),
    "delayavg": Variant("fixed", late_merge=True),
}


@dataclass(frozen=True)
class ADPSGDOptions(CompressOptions):
    seed: int = option(0, "the run's seed (training option): the random ring's permutations")


class ADPSGD(DistributedStrategy):
    """Pairwise asynchronous averaging on a bipartite ring (``variant``: a value of
    :data:`VARIANTS`)."""

    def __init__(self, learner: Learner, options: ADPSGDOptions, variant: str = "fixed") -> None:
        super().__init__(learner, options)
        chosen = VARIANTS[variant]
        self.ring, self.seed = chosen.ring, options.seed
        self.late_merge, self.delay1 = chosen.late_merge, chosen.delay_grad
        self.name = f"adpsgd-{variant}"
        self.engine: Exchange | None = None
        self.staging: DeviceStaging | None = None  # made in wrap_model: the model's device
        # exchanges merged into this learner's weights; a tensor on the device where the
        # count comes from it (hadpsgd's node members), read back only for metrics and state
        self.merged: int | torch.Tensor = 0
        self._stale_on_device: list[torch.Tensor] = []  # staleness noted at the next metrics
        self._resume_round = 0
        self._staleness_rule = update.Staleness(1 if self.delay1 else 0)
        self._delay = update.DelayByOne() if self.delay1 else None
        # elastic where the transport can drop learners (real processes)
        self.elastic = bool(getattr(self.comm, "elastic", False))
        self._ring_now: list[int] | None = None  # the ring the exchange was built for
        self._past_exchanges = 0  # made on rings retired since (elastic)
        self._retired: list[Exchange] = []  # their threads, joined before the process ends

    # -- ring membership (hadpsgd overrides these to put one leader per node on the ring) ----

    def _ring_ranks(self) -> list[int]:
        """The learners on the ring in ring order (elastic: those not dropped, each keeping
        its role where it can: :func:`~asrdist.parallel.rules.rings.keeping_roles`)."""
        return rings.keeping_roles(list(range(self.world_size)), self.comm.departed())

    def _ring_index(self) -> int | None:
        """This learner's position on the ring; None for a learner that does not exchange."""
        ranks = self._ring_ranks()
        return ranks.index(self.rank) if self.rank in ranks else None

    def _sync_node(self, model: torch.nn.Module, delta: torch.Tensor | None,
                   count: int) -> tuple[torch.Tensor | None, int | torch.Tensor]:
        """Give the delta merged by the ring member to the rest of its node (a no-op here)."""
        return delta, count

    # -- hooks --------------------------------------------------------------------------------

    def wrap_model(self, model: torch.nn.Module) -> torch.nn.Module:
        if not self.multi:
            return model
        self.staging = DeviceStaging(model)
        self._build_ring(model, self._resume_round)
        self._start_distance(model)
        return model

    def _build_ring(self, model: torch.nn.Module, start_round: int) -> None:
        """This learner's exchange on the ring of :meth:`_ring_ranks` (every learner of the
        ring builds it at once: at the start, and in elastic runs after a departure)."""
        assert self.staging is not None
        ranks = self._ring_ranks()
        index, n = self._ring_index(), len(ranks)
        on_ring = index is not None and n > 1
        weights, ready = self.staging.snapshot(model) if on_ring else (None, None)
        self._ring_now = ranks
        self.engine = self.comm.pairwise(
            ranks, index, weights, ready, self.staging.zeros,
            lambda r: rings.partner(self.ring, index, n, r, self.seed), start_round,
            codec=self.compression.sender())  # --compress: the weights this learner sends

    def _follow_membership(self, model: torch.nn.Module) -> None:
        """Elastic: after a departure, retire the exchange and build the ring over the
        survivors (same round counter). Called where nothing is in flight; what a retired
        passive exchange still receives is merged with the next merge (no collective here:
        the learners of a hadpsgd node may see the departure at different steps)."""
        if not self.elastic or self._ring_ranks() == self._ring_now:
            return
        old = self.engine
        if old is not None:
            old.retire()
            self._retired.append(old)
            self._resume_round = old.round
            self._past_exchanges += old.exchanges
        # new snapshot vectors: the retired exchange may still read the old ones
        self.staging = DeviceStaging(model)
        self._build_ring(model, self._resume_round)

    def _merge(self, model: torch.nn.Module) -> None:
        """Merge finished exchanges into the weights (the active learner waits for its own)."""
        delta, count = None, 0
        eng = self.engine
        if eng is not None and eng.active and eng.in_flight:
            delta = eng.wait()  # None: elastic, the exchange was lost with its peer
            count = int(delta is not None)
        elif eng is not None and not eng.active:
            delta, count = eng.take_pending()
        for old in self._retired:  # elastic: passive ones may still have served exchanges
            got, n = old.take_pending() if not old.active else (None, 0)
            if got is not None:
                delta, count = (got if delta is None else delta + got), count + n
        delta, count = self._sync_node(model, delta, count)
        if delta is not None:
            assert self.staging is not None
            self.staging.add(model, delta)
            self.merged = self.merged + count  # not in place: the staleness rule keeps it

    def before_step(self, model: torch.nn.Module, step: int) -> None:
        if not self.multi:
            return
        if self.late_merge:
            self._merge(model)
        self._follow_membership(model)
        self._staleness_rule.snapshot(self.merged)
        if self.engine is not None:
            assert self.staging is not None
            snapshot, ready = self.staging.snapshot(model)
            if self.engine.active:
                self.engine.start(snapshot, ready)
            else:
                self.engine.publish(snapshot, ready)
        self.comm.compute_begins()

    def after_backward(self, model: torch.nn.Module, step: int) -> None:
        if not self.multi:
            return
        self.comm.compute_ends()
        if self.staging is not None:  # the merge and the optimizer step write the weights
            self.staging.before_update()
        if not self.late_merge:
            self._merge(model)
        if self._delay is not None:
            self._delay.swap(list(unwrap(model).parameters()))
        stale = self._staleness_rule.at_apply(self.merged)
        if isinstance(stale, torch.Tensor):  # reading it now would wait for the device
            self._stale_on_device.append(stale)
        elif stale is not None:
            self.comm.note_staleness(stale)

    def after_step(self, model: torch.nn.Module, step: int) -> None:
        if self.multi:
            self.comm.note_step(step + 1)

    def sync(self, model: torch.nn.Module) -> None:
        """Merge the exchanges in flight (all learners of a node call it at the same step)."""
        if self.multi:
            self._merge(model)

    def finalize(self, model: torch.nn.Module) -> None:
        self.sync(model)
        self._finish(model)

    def _wait_all_finished(self, model: torch.nn.Module) -> None:
        """Elastic: follow the membership while waiting (others may still build a new ring),
        and once more after: every survivor then leaves on the same ring."""
        if not self.elastic:
            super()._wait_all_finished(model)
            return
        self.comm.wait_all_finished(between=lambda: self._follow_membership(model))
        self._follow_membership(model)

    def _before_final_average(self, model: torch.nn.Module) -> None:
        if self.engine is not None:
            self.engine.finish()
        for old in self._retired:  # they leave once their ring's members have retired it
            old.join(self.comm.timeout_s)
        self._merge(model)
        self._retired = []

    def lockstep(self) -> tuple[tuple[int, ...], int]:
        """This learner alone: asynchronous learners stop and resume at their own steps."""
        return (self.rank,), 1

    def metrics(self) -> dict[str, Any]:
        """The transport's figures (with the staleness counted on the device since the last
        call: read back here, where the trainer reads its loss anyway) and the counters."""
        if self._stale_on_device:
            for value in torch.stack(self._stale_on_device).tolist():
                self.comm.note_staleness(int(value))
            self._stale_on_device = []
        out = super().metrics()
        out["exchanges"] = self._exchanges()
        out["merged"] = int(self.merged)
        return out

    # -- resume ---------------------------------------------------------------------------------

    def state_dict(self) -> dict[str, Any]:
        """The ring's round and counters (after :meth:`sync`, they include its merges)."""
        state: dict[str, Any] = {**super().state_dict(), "merged": int(self.merged)}
        if self.engine is not None or self._past_exchanges:
            state["round"] = self.engine.round if self.engine is not None \
                else self._resume_round
            state["exchanges"] = self._exchanges()
        if self._delay is not None:
            state["prev_grads"] = self._delay.previous
        return state

    def _exchanges(self) -> int:
        return self._past_exchanges + (self.engine.exchanges if self.engine is not None else 0)

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        self.merged = int(state.get("merged", 0))
        self._resume_round = int(state.get("round", 0))
        if self.engine is not None:
            self.engine.round = self._resume_round
            self.engine.exchanges = int(state.get("exchanges", 0))
        if self._delay is not None:
            self._delay.previous = state.get("prev_grads")


SUMMARIES = {
    "fixed": "asynchronous decentralized parallel SGD, fixed bipartite ring",
    "random": "ADPSGD, ring redrawn every iteration from a shared seed",
    "delay1": "ADPSGD, delay-by-one: `w_{k+1} = avg_k(w_k) - lr * g(w_{k-1})`",
    "delayavg": "ADPSGD, averaging one step late, fresh gradient: "
                "`w_{k+1} = w_k + delta_{k-1} - lr * g(w_k)`",
}


def _variant(name: str) -> Callable[[Learner, ADPSGDOptions], ADPSGD]:
    return lambda learner, options: ADPSGD(learner, options, name)


for _name in VARIANTS:
    register(StrategySpec(f"adpsgd-{_name}", _variant(_name), ADPSGDOptions, SUMMARIES[_name],
                          elastic=True))
