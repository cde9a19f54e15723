"""The strategies' update rules as plain functions and small state objects, with no
communication in them.

The process strategies (over torch.distributed) and the many-learner simulator
(:mod:`asrdist.simulate`) both call these, so a simulated learner averages, delays, groups and
counts staleness with the very code a real one does; only the transport differs. Who averages
with whom each round lives beside them in :mod:`asrdist.parallel.rules.rings`.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from asrdist.errors import AsrdistError


def half_difference_(theirs: torch.Tensor, mine: torch.Tensor) -> torch.Tensor:
    """``(theirs - mine) / 2`` computed in ``theirs`` (no temporaries): the delta that turns
    ``mine`` into the pairwise average. The two sides' deltas are exact negatives, so an
    exchange leaves the sum of all weights unchanged."""
    return theirs.sub_(mine).mul_(0.5)


Ready = Callable[[], None] | None  # called before a snapshot is read, on the stream reading it


class PassiveBook:
    """A passive learner's side of pairwise averaging: the weights it serves and the deltas it
    received but its compute thread has not merged yet. ``served + pending`` is always its
    logical weights, whenever an exchange reads them. ``ready`` (from
    :mod:`asrdist.parallel.rules.staging`) is called before served weights still being gathered on a
    GPU are read; ``alloc`` makes the pending vectors (on the model's device): two, made once,
    one accumulating while the compute thread merges the other.

    The book writes into what it is given: a taken delta is added into the served vector
    (which stays the logical weights until the next publish) if an exchange reads them before
    that publish, and a pending vector is handed out by :meth:`take` and written again at the
    take after next, when the compute thread has long merged it."""

    def __init__(self, weights: torch.Tensor, ready: Ready = None,
                 alloc: Callable[[int], torch.Tensor] | None = None) -> None:
        self._alloc = alloc or (lambda n: torch.zeros(n, dtype=weights.dtype))
        self.served, self._ready = weights, ready  # an exchange may come before any publish
        self.pending = self._alloc(weights.numel())
        self._spare: torch.Tensor | None = None  # the pending vector taken last
        self._taken: torch.Tensor | None = None  # ... while not yet in the served weights
        self.count = 0  # exchanges in ``pending``; with none, what it holds is stale

    def publish(self, weights: torch.Tensor, ready: Ready = None) -> None:
        """The compute thread's latest weights (nothing pending is in them; what it took is)."""
        self.served, self._ready, self._taken = weights, ready, None

    def _served_now(self) -> torch.Tensor:
        """The served weights with what was taken since they were published."""
        if self._ready is not None:
            self._ready()
            self._ready = None
        if self._taken is not None:
            self.served.add_(self._taken)
            self._taken = None
        return self.served

    def current_into(self, out: torch.Tensor) -> torch.Tensor:
        """What an exchange swaps, written into ``out``: the published weights plus what is
        pending."""
        if self.count:
            return torch.add(self._served_now(), self.pending, out=out)
        return out.copy_(self._served_now())

    def current(self) -> torch.Tensor:
        """:meth:`current_into` a new vector."""
        return self.current_into(torch.empty_like(self.served))

    def receive(self, delta: torch.Tensor) -> None:
        """One finished exchange's delta (see :func:`half_difference_`)."""
        if self.count:
            self.pending.add_(delta)
        else:  # the first since a take: no pass to zero the vector first
            self.pending.copy_(delta)
        self.count += 1

    def take(self) -> tuple[torch.Tensor | None, int]:
        """The accumulated delta and how many exchanges it holds, for the compute thread to
        add to its weights; resets it."""
        if self.count == 0:
            return None, 0
        delta, count = self.pending, self.count
        self._served_now()  # adds the take before, if any: its vector is about to be reused
        self._taken = delta  # added only if an exchange comes before the next publish
        self.pending = self._spare if self._spare is not None else self._alloc(delta.numel())
        self._spare = delta
        self.count = 0
        return delta, count


class DelayByOne:
    """delay1's gradient rule: the optimizer at step k applies the gradient of step k-1 (none
    at the first step), so ``w_{k+1} = avg_k(w_k) - lr * g(w_{k-1})``."""

    def __init__(self) -> None:
        self.previous: list[torch.Tensor | None] | None = None

    def swap(self, params: list[torch.Tensor]) -> None:
        """Keep the gradients backward just left in ``params`` and put last step's there.

        A gradient with a non-finite element is kept as zeros: fp16's gradient scaler skips
        the step that made it, and applying it a step later would ruin the weights. Tested on
        the device, with no host sync."""
        grads = [p.grad.detach() for p in params if p.grad is not None]
        finite = torch.stack([torch.isfinite(g).all() for g in grads]).all() if grads else None
        current = [None if p.grad is None else
                   torch.where(finite, p.grad.detach(), torch.zeros((), dtype=p.grad.dtype,
                                                                    device=p.grad.device))
                   for p in params]
        previous = self.previous or [None] * len(params)
        for p, g in zip(params, previous, strict=True):
            p.grad = g
        self.previous = current


class Staleness:
    """How many averaging updates were merged into the weights between the snapshot a gradient
    was computed on and that gradient's application (``delay`` steps later: 0 or 1)."""

    def __init__(self, delay: int) -> None:
        self.delay = delay
        self._snapshots: list[int] = []

    def snapshot(self, merged: int | torch.Tensor) -> None:
        """At a step's start: the count of merged averages in the weights snapshotted now (a
        tensor where the count is on the device; then so is the staleness)."""
        self._snapshots = (self._snapshots + [merged])[-(self.delay + 1):]

    def at_apply(self, merged: int | torch.Tensor) -> int | torch.Tensor | None:
        """When a gradient is applied: its staleness, or None if none is applied (delay1's
        first step)."""
        if len(self._snapshots) < self.delay + 1:
            return None
        return merged - self._snapshots[0]


def averaging_due(step: int, period: int) -> bool:
    """ma: whether all learners average their weights after step ``step`` (every ``period``)."""
    return (step + 1) % period == 0


def node_groups(world_size: int, learners_per_node: int | None,
                nodes: list[str] | None = None) -> list[list[int]]:
    """hadpsgd's super-learners: consecutive blocks of ``learners_per_node`` ranks, else the
    ranks grouped by node name."""
    if learners_per_node:
        if world_size % learners_per_node:
            raise AsrdistError(
                f"--learners-per-node {learners_per_node} does not divide {world_size} learners"
            )
        return [list(range(s, s + learners_per_node))
                for s in range(0, world_size, learners_per_node)]
    assert nodes is not None
    order: dict[str, list[int]] = {}
    for r, name in enumerate(nodes):
        order.setdefault(name, []).append(r)
    return sorted(order.values())
