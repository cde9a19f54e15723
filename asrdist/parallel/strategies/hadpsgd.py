"""hadpsgd: hierarchical ADPSGD (Zhang et al., Interspeech'19).

The learners of one node form a *super-learner*: their transport's gradient mean over the node's
group (on processes DistributedDataParallel, nccl on GPU, gloo on CPU) allreduces their
gradients every step, so they hold identical weights.
The node's first learner (its leader) sits on the ADPSGD ring of super-learners (any ADPSGD
variant: ``hadpsgd_variant``); whatever averaging it merges it broadcasts to the rest of its
node at the same point of the same step, so the node's copies stay identical.

Elastic runs (``--elastic``): a node that loses a learner leaves whole (the others' gradient
allreduce fails and ends them, each saying its node leaves and who goes on, so they are dropped
too); the ring re-forms over the leaders of the remaining nodes, as
:mod:`asrdist.parallel.strategies.adpsgd` describes.

A node is the launcher's node (``Learner.node``: hostname, Slurm node name);
``learners_per_node`` forces groups of consecutive ranks instead, to test several nodes on one
machine.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from asrdist.errors import AsrdistError
from asrdist.options import NON_NEGATIVE, option
from asrdist.parallel.registry import StrategySpec, register
from asrdist.parallel.rules import rings
from asrdist.parallel.rules.update import node_groups
from asrdist.parallel.strategies.adpsgd import ADPSGD, VARIANTS, ADPSGDOptions
from asrdist.parallel.strategy import Learner


@dataclass(frozen=True)
class HADPSGDOptions(ADPSGDOptions):
    learners_per_node: int = option(0, "hadpsgd: learners per super-learner, in consecutive "
                                    "ranks (0 = the launcher's nodes)", check=NON_NEGATIVE)
    hadpsgd_variant: str = option("fixed", "hadpsgd: ADPSGD variant among super-learners",
                                  tuple(VARIANTS))


class HADPSGD(ADPSGD):
    """Super-learners (one per node, gradient allreduce inside) on an ADPSGD ring."""

    name = "hadpsgd"

    def __init__(self, learner: Learner, options: HADPSGDOptions) -> None:
        super().__init__(learner, options, options.hadpsgd_variant)
        self.name = f"hadpsgd-{options.hadpsgd_variant}"
        self.learners_per_node = options.learners_per_node
        self.nodes: list[list[int]] = [[0]]
        self._nodes_found = False
        self._node_group: Any = None  # the transport's group of this node
        self._node_buf: torch.Tensor | None = None  # the node's delta and count, made once

    def _ring_ranks(self) -> list[int]:
        """The nodes' leaders (elastic: of the nodes that lost no learner: a node whose
        learner left leaves whole, its gradient allreduce failing on the others)."""
        gone = self.comm.departed()
        left = [m[0] for m in self.nodes if any(r in gone for r in m)]
        return rings.keeping_roles([m[0] for m in self.nodes], left)

    def _ring_index(self) -> int | None:
        leaders = self._ring_ranks()
        return leaders.index(self.rank) if self.rank in leaders else None

    def _find_nodes(self) -> None:
        """Group the learners by node (once; a collective when grouped by node name)."""
        if self._nodes_found:
            return
        names: list[str] | None = None
        if not self.learners_per_node:
            names = self.comm.node_names()
            if names is None:
                raise AsrdistError("--learners-per-node: needed where the learners have no "
                                   "launcher's nodes (the simulator)")
        self.nodes = node_groups(self.world_size, self.learners_per_node, names)
        self._nodes_found = True

    def lockstep(self) -> tuple[tuple[int, ...], int]:
        """The learners of this node: they allreduce every step; nodes are asynchronous."""
        if not self.multi:
            return (self.rank,), 1
        self._find_nodes()
        return tuple(self._my_node()), 1

    def _my_node(self) -> list[int]:
        return next(m for m in self.nodes if self.rank in m)

    def wrap_model(self, model: torch.nn.Module) -> torch.nn.Module:
        if not self.multi:
            return model
        self._find_nodes()
        self._node_group = self.comm.subgroups(self.nodes)
        liveness = getattr(self.comm, "liveness", None)  # real processes: a failed node
        if liveness is not None:  # collective then says the node leaves, not the job ends
            liveness.node = tuple(self._my_node())
        return super().wrap_model(self.comm.gradient_mean(model, self._node_group))

    def after_backward(self, model: torch.nn.Module, step: int) -> None:
        if self.multi:  # before ADPSGD's merge, which the node then shares
            self.comm.gradients_averaged(model)
        super().after_backward(model, step)

    def _sync_node(self, model: torch.nn.Module, delta: torch.Tensor | None,
                   count: int) -> tuple[torch.Tensor | None, int | torch.Tensor]:
        """One broadcast from the leader of its delta and count together, in one vector on the
        device; no count is a zero delta, which the other members add like any other, so no
        one reads the count back to decide (on a GPU that would wait for the whole step).
        The members' count stays on the device (on CPU there is nothing to wait for)."""
        members = self._my_node()
        if len(members) == 1:
            return delta, count
        assert self.staging is not None
        if self._node_buf is None:
            self._node_buf = self.staging.zeros(self.staging.numel + 1)
        buf = self._node_buf
        leader = self.rank == members[0]
        if leader and delta is None:
            buf.zero_()
        elif leader:
            buf[:-1].copy_(delta)
            buf[-1:].fill_(count)
        self.comm.broadcast_(buf, members[0], self._node_group)
        if leader:
            return delta, count
        got = buf[-1].long()
        return buf[:-1], got if got.is_cuda else int(got)

register(StrategySpec(
    "hadpsgd", HADPSGD, HADPSGDOptions,
    "hierarchical ADPSGD: the GPUs of a node allreduce (a super-learner); super-learners run "
    "ADPSGD",
    elastic=True,
))
