"""How long simulated learners take: compute time per step and the cost of each kind of message.

Compute: ``compute_s`` seconds of forward and backward a step, then ``update_s`` seconds of
optimizer step and data loading (the part of a step only delay-by-one overlaps with its
exchange); ``compute_s`` is multiplied by each slow learner's factor (``--slow-learner
RANK:FACTOR[,RANK:FACTOR...]``: several stragglers), times a log-normal jitter of relative
spread ``jitter`` with mean one, drawn from ``(seed, learner, step)`` so a learner's times do
not depend on the strategy or on the others.

Links: learners sit on nodes of ``node_size`` consecutive ranks. A message between two learners
of one node pays the node link (``node_latency_s`` plus its bytes over ``node_bandwidth``:
NVLink, shared memory), any other the cross-node link (``latency_s``, ``bandwidth``: the
network); bandwidths are bytes/s, both directions at once. A ring allreduce of n learners takes
``2 (n-1)`` steps, each moving ``1/n`` of the tensor over every link of the ring at once (the
bandwidth-optimal ring, as NCCL and gloo's ring do), so a step lasts as long as its slowest
link: a ring within one node runs at the node link (a hierarchical strategy's node
allreduce), one spanning nodes at the slower of the two. Each learner's network interface is
its own: several learners of a node sending across nodes at once do not share it.

Overlap: DDP allreduces gradients bucket by bucket as the backward pass produces them, so part
of the allreduce runs during backward. A gradient mean (synchronous SGD's, a hierarchical
node's) exposes only what is left of it: ``a - min(overlap * a, window)``, with ``a`` the
allreduce's cost, ``overlap`` the fraction that can overlap at all (the last bucket, the first
layers' gradients, never does; 0 with one bucket: a model under DDP's 25 MB bucket cap), and
``window`` the time for which every member has been in its backward pass
(:data:`BACKWARD_SHARE` of a step's compute) when the last one finishes. Other communication
never overlaps compute except where the real strategy overlaps it (the thread of an
asynchronous pairwise exchange).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from asrdist.errors import AsrdistError
from asrdist.options import NON_NEGATIVE, POSITIVE, Check, Options, option
from asrdist.parallel.rules.slow import parse_slow_learner

BACKWARD_SHARE = 2 / 3  # of a step's forward and backward: backward costs about two forwards
FRACTION = Check(lambda v: 0 <= v <= 1, "be in [0, 1]")


@dataclass(frozen=True)
class Link:
    """One kind of link: what a message of ``nbytes`` costs on it."""

    latency_s: float
    bandwidth: float

    def send_s(self, nbytes: float) -> float:
        return self.latency_s + nbytes / self.bandwidth


@dataclass(frozen=True)
class SpeedModel(Options):
    """The speed model's options are asrdist-simulate's flags; its slow learners come from
    ``--slow-learner`` (:meth:`with_slow`) and its seed from the run's."""

    compute_s: float = option(1.0, "simulated seconds of forward and backward a step",
                              check=NON_NEGATIVE)
    update_s: float = option(0.0, "simulated seconds of optimizer step and data loading a step",
                             check=NON_NEGATIVE)
    jitter: float = option(0.0, "relative spread of the compute time (log-normal, mean one)",
                           check=NON_NEGATIVE)
    slow: dict[int, float] = field(default_factory=dict)
    latency_s: float = option(0.0, "seconds per message across nodes", check=NON_NEGATIVE,
                              name="latency")
    bandwidth: float = option(math.inf, "bytes/s per link across nodes", check=POSITIVE)
    node_size: int = option(1, "learners per node (consecutive ranks) that share the node "
                            "link", check=POSITIVE)
    node_latency_s: float = option(0.0, "seconds per message inside a node",
                                   check=NON_NEGATIVE, name="node_latency")
    node_bandwidth: float = option(math.inf, "bytes/s per link inside a node", check=POSITIVE)
    overlap: float = option(0.0, "fraction of a gradient allreduce (DDP's: synchronous SGD, "
                            "a hierarchical node) that may run during backward",
                            check=FRACTION)
    seed: int = 0

    @classmethod
    def with_slow(cls, spec: str | None, **kwargs: float) -> SpeedModel:
        """A model with the slow learners of a ``RANK:FACTOR[,RANK:FACTOR...]`` spec (None or
        "": none)."""
        return cls(slow=parse_slow(spec), **kwargs)  # type: ignore[arg-type]

    def step_s(self, learner: int, step: int) -> float:
        """Seconds learner ``learner`` computes forward and backward of step ``step``."""
        t = self.compute_s * self.slow.get(learner, 1.0)
        if self.jitter > 0:
            sigma = math.sqrt(math.log1p(self.jitter ** 2))
            z = np.random.default_rng([self.seed, learner, step]).standard_normal()
            t *= math.exp(sigma * z - sigma * sigma / 2)
        return t

    def node(self, rank: int) -> int:
        return rank // self.node_size

    def link(self, a: int, b: int) -> Link:
        """The link between learners ``a`` and ``b``."""
        if self.node(a) == self.node(b):
            return Link(self.node_latency_s, self.node_bandwidth)
        return Link(self.latency_s, self.bandwidth)

    def send_s(self, nbytes: int, a: int, b: int) -> float:
        """One message (or a swap, both ways at once) of ``nbytes`` between learners ``a`` and
        ``b``."""
        return self.link(a, b).send_s(nbytes)

    def ring_links(self, members: Sequence[int]) -> list[Link]:
        """The links of a ring over ``members`` in their order: member i to member i+1."""
        n = len(members)
        return [self.link(members[i], members[(i + 1) % n]) for i in range(n)]

    def allreduce_s(self, nbytes: int, members: int | Sequence[int]) -> float:
        """A ring allreduce of ``nbytes`` among ``members`` (ranks; a count: ranks 0..n-1 on
        nodes of their own, as if across nodes), 0 for one."""
        if isinstance(members, int):
            members = [r * self.node_size for r in range(members)]
        n = len(members)
        if n <= 1:
            return 0.0
        return 2 * (n - 1) * max(link.send_s(nbytes / n) for link in set(self.ring_links(members)))

    def exposed_s(self, allreduce_s: float, window_s: float) -> float:
        """What a gradient allreduce of ``allreduce_s`` costs after the backward pass ends,
        when every member has been in backward for ``window_s``."""
        return allreduce_s - min(self.overlap * allreduce_s, max(window_s, 0.0))

    def ring_bytes(self, nbytes: int, members: Sequence[int]) -> tuple[float, float]:
        """Bytes a ring allreduce of ``nbytes`` among ``members`` sends, (within nodes,
        across nodes): every member sends ``2 (n-1)/n`` of the tensor to the next."""
        n = len(members)
        if n <= 1:
            return 0.0, 0.0
        each = 2 * (n - 1) / n * nbytes
        cross = sum(1 for i in range(n)
                    if self.node(members[i]) != self.node(members[(i + 1) % n]))
        return each * (n - cross), each * cross

    def to_json(self) -> dict[str, object]:
        """The model as plain JSON: stragglers as a list, an unlimited bandwidth as null."""
        out: dict[str, object] = {f: getattr(self, f) for f in self.__dataclass_fields__}
        out["slow"] = [{"learner": r, "factor": f} for r, f in sorted(self.slow.items())]
        for name in ("bandwidth", "node_bandwidth"):
            if math.isinf(getattr(self, name)):
                out[name] = None
        return out


def parse_slow(spec: str | None) -> dict[int, float]:
    """``"RANK:FACTOR[,RANK:FACTOR...]"`` -> {rank: factor}; None or "" -> {}."""
    slow: dict[int, float] = {}
    for part in (spec or "").split(","):
        one = parse_slow_learner(part.strip())
        if one is None:
            continue
        if one[0] in slow:
            raise AsrdistError(f"--slow-learner {spec!r}: learner {one[0]} named twice")
        slow[one[0]] = one[1]
    return slow
