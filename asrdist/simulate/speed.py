"""How long simulated learners take: compute time per step and the cost of each kind of message.

Compute: ``compute_s`` seconds of forward and backward a step, then ``update_s`` seconds of
optimizer step and data loading (the part of a step only delay-by-one overlaps with its
exchange); ``compute_s`` is multiplied by a slow learner's
factor (``--slow-learner RANK:FACTOR``, as the real strategies take it), times a log-normal
jitter of relative spread ``jitter`` with mean one, drawn from ``(seed, learner, step)`` so a
learner's times do not depend on the strategy or on the others.

Links: every message pays ``latency_s`` plus its bytes over ``bandwidth`` (bytes/s, both
directions at once); a ring allreduce of n learners pays ``2 (n-1)`` latencies and moves
``2 (n-1)/n`` times the tensor over each link (the bandwidth-optimal ring, as NCCL and gloo's
ring do). Communication never overlaps compute except where the real strategy overlaps it
(the thread of an asynchronous pairwise exchange); DDP's overlap of the allreduce with
backward is not modelled.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from asrdist.options import NON_NEGATIVE, POSITIVE, Options, option
from asrdist.parallel.slow import parse_slow_learner


@dataclass(frozen=True)
class SpeedModel(Options):
    """The speed model's options are asrdist-simulate's flags; its slow learner comes from
    ``--slow-learner`` (:meth:`with_slow`) and its seed from the run's."""

    compute_s: float = option(1.0, "simulated seconds of forward and backward a step",
                              check=NON_NEGATIVE)
    update_s: float = option(0.0, "simulated seconds of optimizer step and data loading a step",
                             check=NON_NEGATIVE)
    jitter: float = option(0.0, "relative spread of the compute time (log-normal, mean one)",
                           check=NON_NEGATIVE)
    slow: dict[int, float] = field(default_factory=dict)
    latency_s: float = option(0.0, "seconds per message", check=NON_NEGATIVE, name="latency")
    bandwidth: float = option(math.inf, "bytes/s per link", check=POSITIVE)
    seed: int = 0

    @classmethod
    def with_slow(cls, spec: str | None, **kwargs: float) -> SpeedModel:
        """A model with the slow learner of a ``RANK:FACTOR`` spec (None: none)."""
        slow = parse_slow_learner(spec)
        return cls(slow={slow[0]: slow[1]} if slow else {}, **kwargs)  # type: ignore[arg-type]

    def step_s(self, learner: int, step: int) -> float:
        """Seconds learner ``learner`` computes forward and backward of step ``step``."""
        t = self.compute_s * self.slow.get(learner, 1.0)
        if self.jitter > 0:
            sigma = math.sqrt(math.log1p(self.jitter ** 2))
            z = np.random.default_rng([self.seed, learner, step]).standard_normal()
            t *= math.exp(sigma * z - sigma * sigma / 2)
        return t

    def send_s(self, nbytes: int) -> float:
        """One message (or a swap, both ways at once) of ``nbytes``."""
        return self.latency_s + nbytes / self.bandwidth

    def allreduce_s(self, nbytes: int, n: int) -> float:
        """A ring allreduce of ``nbytes`` among ``n`` learners (0 for one)."""
        if n <= 1:
            return 0.0
        return 2 * (n - 1) * self.latency_s + 2 * (n - 1) / n * nbytes / self.bandwidth
