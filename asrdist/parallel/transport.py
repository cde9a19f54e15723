"""What a strategy does with the other learners, as one small interface with two transports.

A strategy's maths and the order of its steps live once, in its module: it calls a
:class:`Transport` wherever it talks to other learners. Real learner processes get
:class:`asrdist.parallel.processes.transport.ProcessTransport` (torch.distributed: gloo or nccl, and
the liveness, slow-down and timing a process needs); the many-learner simulator gets its own, in
:mod:`asrdist.simulate.transport`, where a collective is a meeting on the simulated clock and a
pairwise exchange a pair of clock events timed by the speed model. Neither side knows any
strategy by name, so a strategy registered from outside asrdist (``ASRDIST_STRATEGIES``) is
simulated as it is trained.

Why plain blocking calls, not a step that yields requests (a generator per hook): a strategy
reads as the straight-line code it is on processes, its hooks keep the
:mod:`asrdist.parallel.strategy` contract every caller already drives with ``train_step``, and
the process path runs exactly the torch.distributed calls it ran before, with no driver loop in
between (no slower, not one bit different). Blocking is then the transport's business: the
simulator runs each learner's ``train_step`` loop as a coroutine on a thread of its own that
only runs when the clock hands it the turn (:mod:`asrdist.simulate.coroutine`), so a blocking
call there is a wait on the clock.

Collectives follow torch.distributed's rule: every member of ``group`` (None: all learners)
calls the same collectives in the same order; that order is what matches them, on both sides.
A group is whatever :meth:`Transport.subgroups` returned; strategies pass it back untouched.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from typing import Any, Protocol, runtime_checkable

import torch

from asrdist.parallel.rules.compress import (
    Codec,
    CompressedMean,
    ErrorFeedback,
    GradientCompression,
)
from asrdist.parallel.rules.update import Ready


class Pending(Protocol):
    """A collective started without waiting (:meth:`Transport.start_average_`,
    :meth:`Transport.start_compressed_mean_`): ``wait`` blocks until its result is in the
    tensors it was given."""

    def wait(self) -> None: ...


class Exchange(Protocol):
    """One ring member's side of ADPSGD's pairwise averaging (see
    :mod:`asrdist.parallel.processes.exchange` for the protocol): an *active* member starts one
    exchange per step and waits for its delta; a *passive* one serves whoever asks and hands over
    the deltas it accumulated. ``round`` and ``exchanges`` are resume state."""

    active: bool
    round: int
    exchanges: int

    @property
    def in_flight(self) -> bool: ...

    def start(self, snapshot: torch.Tensor, ready: Ready = None) -> None: ...

    def wait(self) -> torch.Tensor | None: ...

    def publish(self, weights: torch.Tensor, ready: Ready = None) -> None: ...

    def take_pending(self) -> tuple[torch.Tensor | None, int]: ...

    def finish(self) -> None: ...

    def retire(self) -> None: ...

    def join(self, timeout_s: float) -> None: ...


class OuterState(Protocol):
    """The central outer state of a server strategy (asynchronous DiLoCo's), held by one
    learner: ``push`` takes a learner's pseudo-gradient of ``steps`` local steps, made
    ``seconds`` after its last pull, and returns the global weights after it (a fresh
    tensor), the steps of that learner's next block and the pushes others made since its last
    pull (its staleness). Safe to call from several threads."""

    numel: int  # the flat weights' size

    def push(self, rank: int, pseudo_grad: torch.Tensor, steps: int,
             seconds: float) -> tuple[torch.Tensor, int, int]: ...


class OuterLink(Protocol):
    """One learner's way to the :class:`OuterState`: push a pseudo-gradient, pull the global
    weights, without waiting for any other learner's push."""

    def push_pull(self, pseudo_grad: torch.Tensor, steps: int,
                  payload: torch.Tensor | None = None) -> tuple[torch.Tensor, int, int]: ...

    def finish(self) -> None: ...


@runtime_checkable
class SavedOuterLink(OuterLink, Protocol):
    """An :class:`OuterLink` to a state that no learner holds (elastic processes: the store
    process's, :mod:`asrdist.parallel.processes.outer_server`), so the state's keeper saves and
    resumes it under the run dir it was started with (no message names a path): ``save`` when a
    learner checkpoints at ``step``; ``load`` when a learner resumes from a checkpoint whose
    state was the run ``token``'s (the state is loaded once, a mismatch is an AsrdistError);
    ``token`` names the state of this run, kept in the learners' checkpoints."""

    token: str

    def save(self, step: int) -> None: ...

    def load(self, token: str) -> None: ...


class Transport(ABC):
    """The few things strategies do with other learners. In-place methods end in ``_``;
    blocking ones count as time spent waiting on communication (the processes'
    ``comm_wait_s``, the simulator's ``wait_s``)."""

    rank: int
    world_size: int
    # whether a central outer state lives outside the learners (elastic processes: in the
    # store process), so that a world of one reaches it through outer_server too
    outer_elsewhere: bool = False

    # -- around the step: bookkeeping, no communication -------------------------------------

    @abstractmethod
    def compute_begins(self) -> None:
        """The gradient computation of a step starts (before_step)."""

    @abstractmethod
    def compute_ends(self) -> None:
        """It ended (after_backward)."""

    @abstractmethod
    def note_staleness(self, value: int) -> None:
        """The staleness of the gradient about to be applied."""

    def note_step(self, step: int) -> None:
        """The steps this learner has done (elastic runs name a departure's step)."""
        return None

    def departed(self) -> dict[int, int]:
        """Elastic runs: the learners dropped so far and the step each left at (none where
        no learner can leave: fail-stop runs, the simulator)."""
        return {}

    @abstractmethod
    def watch_distance(self, read: Callable[[], torch.Tensor]) -> None:
        """Sample this learner's distance to the learners' mean of ``read()`` (flat weights)
        from now on, where the transport does so."""

    @abstractmethod
    def metrics(self) -> dict[str, Any]:
        """The transport's figures since the previous call (times, distance to the mean)."""

    # -- groups and collectives ---------------------------------------------------------------

    @abstractmethod
    def subgroups(self, partition: list[list[int]]) -> Any:
        """Split the learners into ``partition`` (every learner calls it with the same one);
        returns the group this learner is in."""

    @abstractmethod
    def node_names(self) -> list[str] | None:
        """Every learner's node name (a collective), or None where there are no nodes."""

    def gather(self, mine: Any) -> dict[int, Any]:
        """Every learner's ``mine`` (a small picklable object) by rank: the trainer's
        agreements (options, run lock, checkpoints held); a transport that runs no trainer
        (the simulator's) has none."""
        raise NotImplementedError(f"{type(self).__name__} gathers no objects")

    @abstractmethod
    def average_(self, tensors: Sequence[torch.Tensor], group: Any = None) -> None:
        """Replace ``tensors`` by their mean over ``group``, each learner's share divided
        before the sum (torch's ``average_parameters``)."""

    @abstractmethod
    def average_all_(self, tensors: Sequence[torch.Tensor]) -> None:
        """Replace ``tensors`` by their mean over all learners, summed and then divided in
        one flat allreduce (the exported average)."""

    @abstractmethod
    def start_average_(self, tensors: Sequence[torch.Tensor], group: Any = None) -> Pending:
        """Start :meth:`average_` of ``tensors`` over ``group`` and return at once, so that
        computing goes on while it runs (Streaming DiLoCo's overlapped outer step): the
        tensors hold the mean once the returned :class:`Pending`'s ``wait`` returned, and must
        not be read or written before. Only that wait counts as waiting on communication."""

    def compressed_mean_(self, vector: torch.Tensor, side: CompressedMean) -> None:
        """Replace flat float32 ``vector`` by the learners' mean over all learners, every
        message encoded by ``side`` (this learner's
        :class:`~asrdist.parallel.rules.compress.CompressedMean`: its codec and error feedback,
        which hold all the maths, so both transports compute the same bits)."""
        raise NotImplementedError(f"{type(self).__name__} has no compressed mean")

    def start_compressed_mean_(self, vector: torch.Tensor, side: CompressedMean) -> Pending:
        """Start :meth:`compressed_mean_` and return at once (streaming-diloco's compressed
        outer step, overlapped as :meth:`start_average_`'s is): ``vector`` holds the mean once
        the returned :class:`Pending`'s ``wait`` returned, and it and ``side`` must not be
        used before. Its bytes are the blocking mean's; only the wait counts as waiting."""
        raise NotImplementedError(f"{type(self).__name__} has no compressed mean")

    @abstractmethod
    def broadcast_(self, tensor: torch.Tensor, src: int, group: Any = None) -> None:
        """Copy learner ``src``'s ``tensor`` into every member's."""

    @abstractmethod
    def any_(self, flag: bool) -> bool:
        """Whether ``flag`` is set on any learner."""

    def gradient_compression(self, name: str, rank: int, error_feedback: bool = True,
                             powersgd_rank: int = 1) -> GradientCompression:
        """ssgd's ``--compress name`` for :meth:`gradient_mean` over all learners, in the form
        this transport runs it (processes: DDP's hooks, PowerSGD among them)."""
        return GradientCompression(name, self.world_size, rank, error_feedback, powersgd_rank)

    @abstractmethod
    def gradient_mean(self, model: torch.nn.Module, group: Any = None,
                      compression: GradientCompression | None = None) -> torch.nn.Module:
        """Give every member of ``group`` its first member's weights and average the
        members' gradients every step; returns the module to train (processes: a
        DistributedDataParallel wrapper, which averages during backward). ``compression``
        (ssgd's --compress, over all learners): the mean's encoding."""

    @abstractmethod
    def gradients_averaged(self, model: torch.nn.Module) -> None:
        """After backward, before the optimizer: the gradients of :meth:`gradient_mean`'s
        ``model`` are the group's mean once this returns."""

    @abstractmethod
    def pairwise(self, ranks: list[int], index: int | None, weights: torch.Tensor | None,
                 ready: Ready, alloc: Callable[[int], torch.Tensor],
                 partner_of: Callable[[int], int], start_round: int,
                 codec: ErrorFeedback | None = None) -> Exchange | None:
        """ADPSGD's exchange among ring members ``ranks`` (every learner calls it); this
        learner is member ``index`` (None: not on the ring). ``weights`` are a passive
        member's until its first publish (None off the ring), ``partner_of(round)`` an
        active one's partner, and ``ready``/``alloc`` as for
        :class:`~asrdist.parallel.rules.update.PassiveBook`. ``codec`` (--compress): the weights
        each side sends are encoded by it, with its error feedback, and each side's delta is
        half the difference of the two *decoded* vectors, so the two deltas stay exact
        negatives (the sum of the weights is kept) while each side keeps its own encoding
        error. None for a learner with no exchange to make."""

    @abstractmethod
    def outer_server(self, state: OuterState | None, host: int,
                     codec: Codec | None = None) -> OuterLink:
        """A central outer state, reached from every learner (a collective: every learner calls
        it, each with ``state``, its own copy of the starting state). Where it lives is the
        transport's: fail-stop processes and the simulator keep learner ``host``'s copy there
        (the others' are dropped); elastic processes (:attr:`outer_elsewhere`) in the store
        process, which takes the first copy that reaches it, and the link is a
        :class:`SavedOuterLink`. ``push_pull`` blocks this learner alone (processes: a server
        thread on ``host`` with point-to-point messages on a gloo group of its own, or the
        store process's server over a socket, its tensors on the CPU; the simulator: clock
        events, the host serving one push at a time). ``finish`` once this
        learner pushes no more (the host's: once every learner has said so). ``codec``
        (--compress): a push crosses the wire as ``push_pull``'s ``payload``, which the host
        decodes; the learner passes the decoded pseudo-gradient too (the same bits), which a
        push applied without a transfer uses."""

    # -- leaving ---------------------------------------------------------------------------------

    @abstractmethod
    def wait_all_finished(self, between: Callable[[], None] | None = None) -> None:
        """Wait until every learner has finished its steps (elastic: or was dropped;
        ``between`` is called while waiting, to follow the ring's membership)."""

    @abstractmethod
    def stop_services(self) -> None:
        """Stop what runs beside the steps (liveness, distance sampling): the run is over."""

    @abstractmethod
    def abandon(self) -> None:
        """This learner ends for an error: let go of whatever would wait on another."""

    @abstractmethod
    def close(self) -> None:
        """Release threads and what holds process groups."""
