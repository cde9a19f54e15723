"""Each strategy as the program one simulated learner runs, built from the real strategies'
rules (:mod:`asrdist.parallel.rules`, :mod:`asrdist.parallel.rings`) and hooks order
(``before_step``, forward/backward, ``after_backward``, clip, optimizer step, ``after_step``).

What differs from the processes is only the transport: a collective is a clock
:class:`~asrdist.simulate.clock.Meeting`, and ADPSGD's exchange thread is a pair of clock events
(the passive side swaps at the time it starts serving, in arrival order, and both deltas land
when the transfer ends), so the order of exchanges and the staleness follow from the speed
model.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

import torch

from asrdist.errors import AsrdistError
from asrdist.parallel import rings, rules
from asrdist.parallel.adpsgd import VARIANTS, Variant
from asrdist.parallel.weights import add_flat, flat_weights
from asrdist.simulate.clock import Process, Wait
from asrdist.simulate.world import World


def spawn(world: World, algo: str, options: Any, steps: int) -> AdpsgdRing | None:
    """Start every learner's program for ``algo`` (a registry name, its options dataclass);
    returns the ring of an ADPSGD-family run (for its final merge), else None."""
    n = world.n
    every = list(range(n))
    if algo == "ssgd":
        world.copy_weights(0, every)  # DDP's broadcast at wrap time
        for i in every:
            world.clock.spawn(i, _ssgd(world, i, steps))
        return None
    if algo == "ma":
        period = options.period()
        for i in every:
            world.clock.spawn(i, _ma(world, i, steps, period))
        return None
    if algo == "single" or n == 1:
        for i in every:
            world.clock.spawn(i, _alone(world, i, steps))
        return None
    if algo.startswith("adpsgd-"):
        variant = VARIANTS[algo.removeprefix("adpsgd-")]
        nodes = [[i] for i in every]
    elif algo == "hadpsgd":
        variant = VARIANTS[options.hadpsgd_variant]
        if not options.learners_per_node:
            raise AsrdistError("--learners-per-node: the simulator needs it for hadpsgd (it has "
                               "no launcher's nodes)")
        nodes = rules.node_groups(n, options.learners_per_node)
        for members in nodes:
            world.copy_weights(members[0], members)  # DDP's broadcast inside the node
    else:
        raise AsrdistError(f"--algo {algo}: the simulator does not know this strategy")
    ring = AdpsgdRing(world, nodes, variant.ring, options.seed)
    for i in every:
        world.clock.spawn(i, ring.program(i, steps, variant))
    return ring


def _alone(world: World, i: int, steps: int) -> Process:
    for k in range(steps):
        yield world.compute(i, k)
        yield world.optimizer_step(i)
        world.end_step(i)


def _ssgd(world: World, i: int, steps: int) -> Process:
    every = list(range(world.n))
    cost = world.speed.allreduce_s(world.nbytes, world.n)
    for k in range(steps):
        yield world.compute(i, k)
        yield world.meeting(("grad", k), every, cost, lambda: world.mean_grads(every))
        yield world.optimizer_step(i)
        world.end_step(i)


def _ma(world: World, i: int, steps: int, period: int) -> Process:
    every = list(range(world.n))
    cost = world.speed.allreduce_s(world.nbytes, world.n)
    for k in range(steps):
        yield world.compute(i, k)
        yield world.optimizer_step(i)
        if world.n > 1 and rules.averaging_due(k, period):
            yield world.meeting(("ma", k), every, cost, lambda: world.mean_weights(every))
        world.end_step(i)


class AdpsgdRing:
    """ADPSGD among the leaders of ``nodes`` (one learner each: plain ADPSGD; more: hadpsgd's
    super-learners, whose members allreduce gradients and share every merged delta)."""

    def __init__(self, world: World, nodes: list[list[int]], kind: str, seed: int) -> None:
        self.world, self.nodes, self.kind, self.seed = world, nodes, kind, seed
        self.node_of = {i: members for members in nodes for i in members}
        self.leaders = [members[0] for members in nodes]
        self.size = len(self.leaders)
        self.books = {p: rules.PassiveBook(flat_weights(world.learners[self.leaders[p]].model))
                      for p in rings.passives(self.size)}
        self.round = [0] * self.size
        self.free_at = [0.0] * self.size  # when a passive is done serving what it was asked
        self.in_flight: dict[int, dict[str, Any]] = {}
        self.exchanges = 0

    def _start(self, index: int, snapshot: torch.Tensor) -> None:
        """Active ``index`` sends this step's exchange to the partner of its round."""
        clock = self.world.clock
        peer = rings.partner(self.kind, index, self.size, self.round[index], self.seed)
        self.round[index] += 1
        begin = max(clock.now, self.free_at[peer])
        done = begin + self.world.speed.send_s(self.world.nbytes)
        self.free_at[peer] = done
        slot: dict[str, Any] = {"done": done, "delta": None}
        book = self.books[peer]

        def serve() -> None:
            mine = book.current()
            to_passive = rules.half_difference_(snapshot.clone(), mine)
            slot["delta"] = rules.half_difference_(mine, snapshot)
            clock.at(done, lambda: book.receive(to_passive))

        clock.at(begin, serve)
        self.in_flight[index] = slot
        self.exchanges += 1

    def _merge(self, i: int, key: Any) -> Generator[Wait, None, None]:
        """ADPSGD's ``_merge``: the active leader waits for its exchange, a passive one takes
        what it received; the node's members get the same delta (``_sync_node``)."""
        delta, count = None, 0
        members = self.node_of[i]
        if i == members[0] and self.size > 1:
            index = self.leaders.index(i)
            slot = self.in_flight.pop(index, None)
            if slot is not None:
                while slot["delta"] is None or slot["done"] > self.world.clock.now:
                    yield self.world.clock.wait_until(i, slot["done"])
                delta, count = slot["delta"], 1
            elif not rings.is_active(index):
                delta, count = self.books[index].take()
        if len(members) == 1:
            self._apply(members, delta, count)
            return
        shared = self.world.meeting(("node", members[0], key), members, 0.0)
        if i == members[0]:
            def broadcast(delta=delta, count=count) -> float:
                self._apply(members, delta, count)
                speed = self.world.speed
                return speed.send_s(8) + (speed.send_s(self.world.nbytes) if count else 0.0)

            shared.action = _then(shared.action, broadcast)
        yield shared

    def _apply(self, members: list[int], delta: torch.Tensor | None, count: int) -> None:
        if delta is None:
            return
        for m in members:
            add_flat(self.world.learners[m].model, delta)
            self.world.learners[m].merged += count

    def program(self, i: int, steps: int, variant: Variant) -> Process:
        """One learner's loop: the hooks of ``ADPSGD`` (and ``HADPSGD``) in train_step order."""
        world, me = self.world, self.world.learners[i]
        members = self.node_of[i]
        index = self.leaders.index(i) if i == members[0] else None
        stale = rules.Staleness(1 if variant.delay_grad else 0)
        delay = rules.DelayByOne() if variant.delay_grad else None
        grad_cost = world.speed.allreduce_s(world.nbytes, len(members))
        for k in range(steps):
            if variant.late_merge:  # before_step
                yield from self._merge(i, ("before", k))
            stale.snapshot(me.merged)
            if index is not None and self.size > 1:
                snapshot = flat_weights(me.model)
                if rings.is_active(index):
                    self._start(index, snapshot)
                else:
                    self.books[index].publish(snapshot)
            yield world.compute(i, k)
            if len(members) > 1:  # DDP inside the node, during backward
                yield world.meeting(("grad", members[0], k), members, grad_cost,
                                    lambda: world.mean_grads(members))
            if not variant.late_merge:  # after_backward
                yield from self._merge(i, ("after", k))
            if delay is not None:
                delay.swap(list(me.model.parameters()))
            value = stale.at_apply(me.merged)
            if value is not None:
                world.staleness[value] += 1
            yield world.optimizer_step(i)
            world.end_step(i)
        yield from self._merge(i, "sync")  # finalize: sync

    def leave(self) -> None:
        """``_before_final_average``: passives merge what arrived after their last sync."""
        for index in rings.passives(self.size):
            delta, count = self.books[index].take()
            self._apply(self.nodes[index], delta, count)


def _then(first, second):
    """Run ``first`` (a meeting's own action) then ``second``; the cost is ``second``'s."""
    def both() -> float | None:
        if first is not None:
            first()
        return second()

    return both
