"""The simulated learners and what the run records of them.

Each learner has its own module and data shard (``loss_fn`` is called with the learner's index
and step); its optimizer (momentum state) is made when its strategy has wrapped the module, as
in the trainer. Memory and time grow linearly in the number of learners: nothing is shared
between them but the clock and the collectives they meet at.

A learner that leaves (lost in its scenario, or a hierarchical node's mate of a lost one whose node
collective failed) is recorded by :meth:`World.depart` as processes record it (the step it
left at). In a run of an ``elastic`` strategy the survivors go on: the meetings it belonged to
fail (those waiting at them see it at once), the survivors' ``departed()`` names it at once (on
processes within a heartbeat or an exchange timeout; the simulator takes no detection delay)
and the run's records and export are the survivors'. Otherwise (fail-stop, the learner held
a central state the others need, or it was the last) the run ends at that moment, ``failed``,
as the processes' job ends: there is no exported model.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from asrdist.parallel.rules.weights import flat_weights
from asrdist.simulate.clock import Clock, Later, Meeting
from asrdist.simulate.speed import SpeedModel

LossFn = Callable[[int, int, torch.nn.Module], torch.Tensor]
EvalFn = Callable[[torch.nn.Module], dict[str, float]]


@dataclass
class SimLearner:
    index: int
    model: torch.nn.Module
    steps: int = 0
    history: list[torch.Tensor] = field(default_factory=list)


def float_tensors(model: torch.nn.Module) -> list[torch.Tensor]:
    """Parameters and floating buffers: what the exported average covers."""
    return list(model.parameters()) + [b for b in model.buffers() if torch.is_floating_point(b)]


@torch.no_grad()
def average_into(tensor_lists: list[list[torch.Tensor]]) -> None:
    """Replace the i-th tensor of every list by the mean of the i-th tensors (an allreduce
    of sum(t / n) in learner order, as DDP's hook and ``average_parameters`` compute it)."""
    n = len(tensor_lists)
    for group in zip(*tensor_lists, strict=True):
        mean = torch.stack([t / n for t in group]).sum(0)
        for t in group:
            t.copy_(mean)


class World:
    """Learners, clock, speed model and the run's records."""

    def __init__(self, learners: list[SimLearner], speed: SpeedModel, loss_fn: LossFn,
                 keep_history: bool = False) -> None:
        self.learners, self.speed, self.loss_fn = learners, speed, loss_fn
        self.keep_history = keep_history
        self.clock = Clock()
        self.staleness: Counter[int] = Counter()
        self.exchanges: int | None = None  # pairwise exchanges started, once a ring exists
        self.on_step: Callable[[], None] | None = None
        self.steps_waited = [0.0] * len(learners)  # each learner's waits during its steps
        self.backward_s = [0.0] * len(learners)  # each learner's last backward pass (overlap)
        self.wire = {"node": 0.0, "cross": 0.0}  # bytes sent by all learners, by link
        self._meetings: dict[Any, Meeting] = {}
        self.elastic = False  # the strategy goes on without a lost learner
        self.hosts: set[int] = set()  # learners holding a central state (its loss ends the run)
        self.left: dict[int, int] = {}  # learner -> the step it left at
        self.departures: list[dict[str, Any]] = []
        self.failed: dict[str, Any] | None = None  # the run ended at a loss (fail-stop)
        self.finished: set[int] = set()  # learners that took all their steps
        self.swaps_lost = 0  # pairwise swaps lost because a side left mid-transfer
        self._changed: Later | None = None  # settled at the next finish or departure

    @property
    def n(self) -> int:
        return len(self.learners)

    def meeting(self, key: Any, members: tuple[int, ...], cost_s: float,
                action: Callable[[Meeting], float | None]) -> Meeting:
        """The meeting ``key`` of ``members`` (made by the first to ask; forgotten once held);
        ``action(meeting)`` runs when the last one arrives."""
        if any(m in self.left for m in members):  # never held: a member is gone
            return Meeting(members, cost_s, failed=True)
        found = self._meetings.get(key)
        if found is None:
            def held() -> float | None:
                del self._meetings[key]
                return action(found)

            found = self._meetings[key] = Meeting(members, cost_s, held)
        return found

    def end_step(self, i: int) -> None:
        lr = self.learners[i]
        lr.steps += 1
        if self.keep_history:
            lr.history.append(flat_weights(lr.model))
        if self.on_step is not None:
            self.on_step()

    def sent(self, node: float, cross: float) -> None:
        """Count bytes sent within nodes and across them."""
        self.wire["node"] += node
        self.wire["cross"] += cross

    def steps_done(self, i: int) -> None:
        """Learner i took its last step: what it waited so far is the run's (what follows is
        the strategy's end, where every learner waits for the last)."""
        self.steps_waited[i] = self.clock.waited.get(i, 0.0)
        self.finished.add(i)
        self._settle_change()

    def survivors(self) -> list[int]:
        """The learners that have not left, by rank."""
        return [r for r in range(self.n) if r not in self.left]

    def depart(self, i: int, why: str) -> None:
        """Learner ``i`` leaves for good now, after its steps so far (see the module
        docstring): dropped in an elastic run, the run's end otherwise."""
        if i in self.left:
            return
        self.left[i] = self.learners[i].steps
        self.steps_waited[i] = self.clock.waited.get(i, 0.0)
        self.departures.append({"learner": i, "step": self.left[i], "time_s": self.clock.now,
                                "why": why})
        if not self.elastic or i in self.hosts or not self.survivors():
            self.failed = {**self.departures[-1], "why": f"learner {i} {why}"
                           f"{self._ends_because(i)}"}
            self.clock.halt()
            return
        for key, meeting in list(self._meetings.items()):
            if i in meeting.members:
                del self._meetings[key]
                self.clock.fail(meeting)
        self._settle_change()

    def _ends_because(self, i: int) -> str:
        """Why learner ``i``'s departure ends the run: a fail-stop run's end, the outer
        state's host, or the last learner of an elastic run (none is left to export)."""
        if self.elastic and i not in self.hosts:
            return ": every learner is lost, so nothing is exported"
        held = " (it holds the outer state)" if i in self.hosts else ""
        return f"{held}: the run ends there, as a real job does"

    def all_accounted(self) -> bool:
        """Every learner has finished its steps or left."""
        return all(r in self.finished or r in self.left for r in range(self.n))

    def next_change(self) -> Later:
        """What a learner waiting for the others (elastic) waits on: the next finish or
        departure."""
        if self._changed is None:
            self._changed = Later()
        return self._changed

    def _settle_change(self) -> None:
        if self._changed is not None:
            changed, self._changed = self._changed, None
            self.clock.settle(changed, self.clock.now)

    def total_steps(self) -> int:
        return sum(lr.steps for lr in self.learners)

    def distance_to_mean(self) -> float:
        """Root mean square over the learners (that have not left) of ||w_i - mean||."""
        flats = torch.stack([flat_weights(self.learners[r].model) for r in self.survivors()])
        d = (flats - flats.mean(0)).norm(dim=1)
        return math.sqrt(float((d * d).mean()))

    def summary(self) -> dict[str, Any]:
        """time_s: the run's end, the strategy's final average included (a real run's wall
        time includes it); wait_s: each learner's time spent waiting during its steps;
        wire_bytes: what all learners sent, within nodes and across them; departures: the learners
        that left (learner, step, time, why) and swaps_lost, the pairwise swaps lost with them
        (neither side merged); failed: where a loss ended the run."""
        out = {"time_s": self.clock.now, "wait_s": list(self.steps_waited),
               "staleness": dict(sorted(self.staleness.items())),
               "wire_bytes": dict(self.wire)}
        if self.exchanges is not None:
            out["exchanges"] = self.exchanges
        if self.departures:
            out["departures"] = list(self.departures)
            out["swaps_lost"] = self.swaps_lost
        if self.failed is not None:
            out["failed"] = dict(self.failed)
        return out
