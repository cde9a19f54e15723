"""The simulator's transport (:class:`asrdist.parallel.transport.Transport`): what a strategy
does with other learners, on the simulated clock. It knows no strategy; every strategy's own
hooks run on it.

- A collective is a clock :class:`~asrdist.simulate.clock.Meeting` of its group, matched as
  torch.distributed matches them (the k-th call on a group by each member); each member brings
  its tensors, the last to arrive computes the result into all of them, and all leave
  when the speed model's cost has passed: a ring allreduce for an average (a gradient mean's
  less what overlapped the members' backward passes), one message for a broadcast (DDP's
  broadcast of the first member's weights at wrap time included), nothing for a barrier. The
  links are the speed model's: a node's learners talk over the node link, and a launcher's
  nodes (a hierarchical strategy's default groups) are the speed model's when it has some.
  An average started without waiting (``start_average_``, an asynchronous allreduce on
  processes) is such a meeting that no member waits at: the last to start it computes the
  mean and its end, and a member that waits for it later waits only for what is left.
- The asynchronous pairwise exchange (a communication thread on processes) is a pair of
  clock events per exchange: the passive side swaps what it serves at the time it starts
  serving (in arrival order: a passive asked twice serves in turn), and both deltas land when
  the transfer ends, so the order of exchanges and the staleness follow from the speed model.
  The passive side's state is the very :class:`~asrdist.parallel.rules.update.PassiveBook` of the
  real exchange.
- A central outer state (a server strategy's) is the host learner's very object: a
  push travels to the host over the speed model's link, is applied when it arrives (the host
  serves one push at a time) and the global weights travel back; the host's own pushes are
  applied at once and cost nothing, as on processes.
- Every message's bytes are counted (``wire_bytes`` in the run's summary), within nodes and
  across them.
- A lost learner (:meth:`asrdist.simulate.world.World.depart`): a collective with it fails
  (:class:`LostPeer`, raised where the member waits, as a process's collective raises); an
  elastic run's ring is made by its members alone, again after each departure, a swap that
  has not landed when either side leaves is lost for both (nothing of a lost learner is merged
  after its loss), and the end (waiting for the others, the final average, the stop flag) is
  the survivors'. A lost outer-state host ends the run (:attr:`World.hosts`).
- Waiting is the clock's: every blocking call is counted in the learner's ``wait_s``; the
  bookkeeping of processes (liveness, slow-down, timing, distance sampling) has nothing to do
  here (the speed model's slow learners and the run's own distance to the mean replace it).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from asrdist.errors import AsrdistError
from asrdist.parallel.rules import rings
from asrdist.parallel.rules.compress import (
    Codec,
    CompressedMean,
    ErrorFeedback,
    GradientCompression,
    compressed_mean,
)
from asrdist.parallel.rules.update import PassiveBook, Ready, half_difference_
from asrdist.parallel.rules.weights import load_flat_grads
from asrdist.parallel.transport import OuterState, Transport
from asrdist.simulate.clock import Later, Meeting, Wait
from asrdist.simulate.coroutine import Coroutine
from asrdist.simulate.world import World, average_into


class LostPeer(BaseException):
    """A collective of this learner's can never be held: a member left. Not an Exception, so
    no strategy code catches it: the learner leaves too (a hierarchical strategy's node mate), where
    :mod:`asrdist.simulate.run` catches it."""


def _nbytes(tensors: Sequence[torch.Tensor]) -> int:
    return sum(t.numel() * t.element_size() for t in tensors)


class SimTransport(Transport):
    """Learner ``rank`` of ``world``; :attr:`turn` (the coroutine its program runs in) is set
    before it runs."""

    def __init__(self, world: World, rank: int) -> None:
        self.world, self.rank, self.world_size = world, rank, world.n
        self.turn: Coroutine | None = None
        self._calls: Counter[tuple[int, ...]] = Counter()
        self._grad_group: tuple[int, ...] | None = None
        self._compression: GradientCompression | None = None
        self.timeout_s = 0.0  # what a retired exchange is joined with: it has no thread

    @property
    def elastic(self) -> bool:
        """Whether the strategy goes on without a lost learner (read by pairwise strategies)."""
        return self.world.elastic

    def departed(self) -> dict[int, int]:
        return dict(self.world.left)

    # -- the clock ---------------------------------------------------------------------------------

    def wait(self, what: Wait) -> None:
        """Give the turn back until ``what`` (a time, a meeting)."""
        assert self.turn is not None
        self.turn.wait(what)

    def sleep(self, seconds: float) -> None:
        """Spend ``seconds`` of simulated time (computing: not counted as waiting)."""
        self.wait(self.world.clock.now + seconds)

    def _members(self, group: Any) -> tuple[int, ...]:
        """A group's members; all learners for None (elastic: those that have not left, as
        the processes' survivors' group)."""
        if group is not None:
            return tuple(group)
        if self.world.elastic:
            return tuple(self.world.survivors())
        return tuple(range(self.world_size))

    def _meet(self, members: tuple[int, ...], cost_s: float, payload: Any,
              action: Callable[[Meeting], float | None], key: Any = None) -> Meeting:
        """This learner's next collective on ``members`` (or the one named ``key``), bringing
        ``payload``; raises :class:`LostPeer` if a member has left."""
        if key is None:
            self._calls[members] += 1
            key = (members, self._calls[members])
        meeting = self.world.meeting(key, members, cost_s, action)
        meeting.payloads[self.rank] = payload
        self.wait(meeting)
        if meeting.failed:
            raise LostPeer(f"learner {self.rank}: a collective of learners {list(members)} "
                           f"lost learners {sorted(set(members) & set(self.world.left))}")
        return meeting

    # -- around the step: nothing to do (the clock keeps the time) ---------------------------------

    def compute_begins(self) -> None:
        pass

    def compute_ends(self) -> None:
        pass

    def note_staleness(self, value: int) -> None:
        self.world.staleness[value] += 1

    def watch_distance(self, read: Callable[[], torch.Tensor]) -> None:
        """The run measures the distance itself, at every evaluation."""

    def metrics(self) -> dict[str, Any]:
        return {}

    # -- groups and collectives ---------------------------------------------------------------

    def subgroups(self, partition: list[list[int]]) -> Any:
        return next(tuple(m) for m in partition if self.rank in m)

    def node_names(self) -> list[str] | None:
        """The speed model's nodes, if it has nodes of several learners (else none: there is
        no launcher)."""
        speed = self.world.speed
        if speed.node_size <= 1:
            return None
        return [f"node{speed.node(r)}" for r in range(self.world_size)]

    def _allreduce_s(self, nbytes: int, members: tuple[int, ...]) -> float:
        """A ring allreduce's cost, its bytes counted."""
        speed = self.world.speed
        self.world.sent(*speed.ring_bytes(nbytes, members))
        return speed.allreduce_s(nbytes, members)

    def _mean(self, tensors: Sequence[torch.Tensor], members: tuple[int, ...],
              overlaps: bool = False) -> None:
        """Average ``tensors`` over ``members``; with ``overlaps`` (a gradient mean) the
        allreduce partly runs during the members' backward passes."""
        tensors = list(tensors)
        world = self.world

        def mean(m: Meeting) -> float:
            average_into([m.payloads[r] for r in members])
            cost = self._allreduce_s(_nbytes(tensors), members)
            if not overlaps:
                return cost
            began = max(t - world.backward_s[r] for r, t in m.arrived.items())
            return world.speed.exposed_s(cost, world.clock.now - began)

        self._meet(members, 0.0, tensors, mean)

    def average_(self, tensors: Sequence[torch.Tensor], group: Any = None) -> None:
        self._mean(tensors, self._members(group))

    def average_all_(self, tensors: Sequence[torch.Tensor]) -> None:
        self._mean(tensors, self._members(None))

    def start_average_(self, tensors: Sequence[torch.Tensor], group: Any = None) -> SimPending:
        """A meeting this learner does not wait at: the last member to start it computes the
        mean into every member's tensors and sets when the allreduce ends (from then, at the
        speed model's cost); a member's wait is only what is left of it by then, so a
        transfer hidden behind the steps computed meanwhile costs nothing."""
        members, tensors = self._members(group), list(tensors)

        def mean(m: Meeting) -> float:
            average_into([m.payloads[r] for r in members])
            return self._allreduce_s(_nbytes(tensors), members)

        return self._start_meeting(members, tensors, mean)

    def _start_meeting(self, members: tuple[int, ...], payload: Any,
                       action: Callable[[Meeting], float]) -> SimPending:
        """This learner's next collective on ``members``, started without waiting: the last
        to start it runs ``action`` (which returns the transfer's cost) and the meeting's
        result ends that cost later."""
        clock = self.world.clock
        self._calls[members] += 1

        def start(m: Meeting) -> None:
            clock.settle(m.result, clock.now + action(m))

        meeting = self.world.meeting((members, self._calls[members]), members, 0.0, start)
        if meeting.result is None:
            meeting.result = Later()
        meeting.payloads[self.rank] = payload
        meeting.arrived[self.rank] = clock.now
        if len(meeting.arrived) == len(members):
            assert meeting.action is not None
            meeting.action()
        return SimPending(self, meeting.result)

    def compressed_mean_(self, vector: torch.Tensor, side: CompressedMean) -> None:
        """The processes' maths (:func:`~asrdist.parallel.rules.compress.compressed_mean`) in one
        go by the last to arrive, charged as a ring allreduce of the encoded vector (what the
        processes' reduce-scatter and all-gather send)."""
        members = self._members(None)
        self._meet(members, 0.0, (vector, side),
                   lambda m: self._compressed_mean_into(m, members, side, vector.numel()))

    def _compressed_mean_into(self, m: Meeting, members: tuple[int, ...], side: CompressedMean,
                              numel: int) -> float:
        """Put the members' compressed mean into each one's vector (their payloads: vector,
        side); its cost, a ring allreduce of the encoded vector."""
        vectors = [m.payloads[r][0] for r in members]
        result = compressed_mean(vectors, [m.payloads[r][1] for r in members])
        with torch.no_grad():
            for v in vectors:
                v.copy_(result)
        return self._allreduce_s(side.wire_bytes(numel), members)

    def start_compressed_mean_(self, vector: torch.Tensor, side: CompressedMean) -> SimPending:
        """:meth:`compressed_mean_` as a meeting nobody waits at (as :meth:`start_average_`):
        the last learner to start it computes the mean into every member's vector and sets
        its end at the blocking mean's cost from then, so a member's wait is what the steps
        computed meanwhile did not hide."""
        members = self._members(None)
        return self._start_meeting(
            members, (vector, side),
            lambda m: self._compressed_mean_into(m, members, side, vector.numel()))

    def broadcast_(self, tensor: torch.Tensor, src: int, group: Any = None) -> None:
        self._broadcast([tensor], src, self._members(group))

    def _broadcast(self, tensors: list[torch.Tensor], src: int,
                   members: tuple[int, ...]) -> None:
        """One message from ``src`` to all (pipelined), paced by the slowest link it takes."""
        speed, nbytes = self.world.speed, _nbytes(tensors)
        others = [r for r in members if r != src]
        cost = max((speed.send_s(nbytes, src, r) for r in others), default=0.0)

        def copy(m: Meeting) -> None:
            cross = sum(speed.node(r) != speed.node(src) for r in others)
            self.world.sent(nbytes * (len(others) - cross), nbytes * cross)
            with torch.no_grad():
                for r in others:
                    for t, s in zip(m.payloads[r], m.payloads[src], strict=True):
                        t.copy_(s)

        self._meet(members, cost, tensors, copy)

    def any_(self, flag: bool) -> bool:
        members = self._members(None)

        def either(m: Meeting) -> float:
            m.result = any(m.payloads.values())
            return self._allreduce_s(4, members)

        return bool(self._meet(members, 0.0, flag, either).result)

    def gradient_mean(self, model: torch.nn.Module, group: Any = None,
                      compression: GradientCompression | None = None) -> torch.nn.Module:
        if compression is not None and compression.name == "powersgd":
            raise AsrdistError("--compress powersgd: real processes only (torch's PowerSGD "
                               "hook runs inside DDP); the simulator has none")
        members = self._members(group)
        self._broadcast(list(model.parameters()), members[0], members)
        self._grad_group = members
        self._compression = compression
        return model

    def gradients_averaged(self, model: torch.nn.Module) -> None:
        if self._grad_group is None:
            return
        grads = [p.grad for p in model.parameters() if p.grad is not None]
        if len(grads) < len(list(model.parameters())):  # as DistributedDataParallel refuses it
            raise AsrdistError("a parameter got no gradient: a gradient mean needs every "
                               "parameter in the loss")
        codec = self._compression
        if codec is None:
            self._mean(grads, self._grad_group, overlaps=True)
        elif codec.side is not None:  # after backward, as the processes do: no overlap
            with torch.no_grad():
                flat = torch.cat([g.reshape(-1).float() for g in grads])
                self.compressed_mean_(flat, codec.side)
                load_flat_grads(list(model.parameters()), flat)
        else:
            self._cast_mean(grads, codec)

    def _cast_mean(self, grads: list[torch.Tensor], codec: GradientCompression) -> None:
        """torch's bf16/fp16 hook: each learner's gradient cast and divided by N, summed in
        that precision (in rank order), cast back."""
        members, world = self._grad_group, self.world
        assert members is not None and codec.cast is not None
        dtype, n = codec.cast, len(members)

        def mean(m: Meeting) -> float:
            with torch.no_grad():
                for i, _ in enumerate(grads):
                    total = m.payloads[members[0]][i].to(dtype).div_(n)
                    for r in members[1:]:
                        total = total + m.payloads[r][i].to(dtype).div_(n)
                    for r in members:
                        m.payloads[r][i].copy_(total)
            nbytes = codec.wire_bytes(sum(g.numel() for g in grads))
            cost = self._allreduce_s(nbytes, members)
            began = max(t - world.backward_s[r] for r, t in m.arrived.items())
            return world.speed.exposed_s(cost, world.clock.now - began)

        self._meet(members, 0.0, grads, mean)

    def pairwise(self, ranks: list[int], index: int | None, weights: torch.Tensor | None,
                 ready: Ready, alloc: Callable[[int], torch.Tensor],
                 partner_of: Callable[[int], int], start_round: int,
                 codec: ErrorFeedback | None = None) -> SimExchange | None:
        """A collective of all learners, as the exchange group's creation is on processes:
        once it is held, every passive member's book is there to be asked. Elastic: of the
        ring's members alone, as the processes' (none if one leaves meanwhile: the next step
        builds the ring of the survivors)."""
        member = index if weights is not None and len(ranks) > 1 else None
        elastic = self.world.elastic
        if elastic and member is None:
            return None
        book = None
        if member is not None and not rings.is_active(member):
            assert weights is not None
            book = PassiveBook(weights, ready, alloc)

        def make_ring(m: Meeting) -> None:
            m.result = SimRing(list(ranks))
            for i, b, c in m.payloads.values():
                if b is not None:
                    m.result.books[i] = b
                if i is not None and c is not None:
                    m.result.codecs[i] = c
            if self.world.exchanges is None:
                self.world.exchanges = 0

        if elastic:
            try:
                ring = self._meet(tuple(ranks), 0.0, (member, book, codec), make_ring,
                                  key=("ring", tuple(ranks))).result
            except LostPeer:
                return None
        else:
            ring = self._meet(self._members(None), 0.0, (member, book, codec), make_ring).result
        if member is None:
            return None
        return SimExchange(self, ring, member, partner_of, start_round)

    def outer_server(self, state: OuterState | None, host: int,
                     codec: Codec | None = None) -> SimOuterLink:
        """A collective of all learners, as the server group's creation is on processes: once
        it is held, the host's state is there to be pushed to (``codec``: nothing to do here,
        the learner passes the decoded pseudo-gradient and the payload whose bytes travel)."""

        def share(m: Meeting) -> None:
            m.result = SimServer(host, m.payloads[host])

        self.world.hosts.add(host)
        server = self._meet(self._members(None), 0.0, state, share).result
        return SimOuterLink(self, server)

    # -- leaving ---------------------------------------------------------------------------------

    def wait_all_finished(self, between: Callable[[], None] | None = None) -> None:
        """A meeting of all learners; elastic: until every learner has finished or left,
        calling ``between`` at each change (a survivor may be building a new ring)."""
        world = self.world
        if not world.elastic:
            self._meet(self._members(None), 0.0, None, lambda m: None)
            return
        while True:
            if between is not None:
                between()
            if world.all_accounted():
                return
            self.wait(world.next_change())

    def stop_services(self) -> None:
        pass

    def abandon(self) -> None:
        pass

    def close(self) -> None:
        pass


@dataclass
class SimPending:
    """A :meth:`SimTransport.start_average_` in flight: waiting is waiting for its end."""

    comm: SimTransport
    done: Later

    def wait(self) -> None:
        self.comm.wait(self.done)


@dataclass
class SimRing:
    """What the members of one ring share: the passive members' books, and when each passive
    member is done serving what it was asked so far."""

    ranks: list[int]  # the members' ranks, by index on the ring
    books: dict[int, PassiveBook] = field(default_factory=dict)
    codecs: dict[int, ErrorFeedback] = field(default_factory=dict)  # --compress, by index
    free_at: dict[int, float] = field(default_factory=dict)


@dataclass
class _Slot:
    done: float
    delta: torch.Tensor | None = None
    landed: bool = False  # the transfer ended (the passive side received, or it was lost)
    lost: bool = False  # a side left before it landed: neither merges it

    def ready(self, elastic: bool) -> bool:
        """Whether the active side may take its result (elastic: once it landed or was
        lost; else once served, as before any learner could leave)."""
        if elastic:
            return self.landed or self.lost
        return self.delta is not None


class SimExchange:
    """One ring member's side (see :class:`asrdist.parallel.transport.Exchange`)."""

    def __init__(self, comm: SimTransport, ring: SimRing, index: int,
                 partner_of: Callable[[int], int], start_round: int) -> None:
        self.comm, self.ring, self.index = comm, ring, index
        self.active = rings.is_active(index)
        self.round, self.exchanges = start_round, 0
        self._partner_of = partner_of
        self._slot: _Slot | None = None

    @property
    def in_flight(self) -> bool:
        return self._slot is not None

    def start(self, snapshot: torch.Tensor, ready: Ready = None) -> None:
        """Send ``snapshot`` to this round's partner: served when the partner is free, both
        deltas known then, the partner's landing when the transfer ends."""
        if ready is not None:
            ready()
        world, clock = self.comm.world, self.comm.world.clock
        peer = self._partner_of(self.round)
        self.round += 1
        self.exchanges += 1
        assert world.exchanges is not None
        world.exchanges += 1
        begin = max(clock.now, self.ring.free_at.get(peer, 0.0))
        me, other = self.ring.ranks[self.index], self.ring.ranks[peer]
        codecs = self.ring.codecs
        nbytes = snapshot.numel() * snapshot.element_size() if self.index not in codecs \
            else codecs[self.index].codec.wire_bytes(snapshot.numel())
        done = begin + world.speed.send_s(nbytes, me, other)
        cross = world.speed.node(me) != world.speed.node(other)
        world.sent(*((0, 2 * nbytes) if cross else (2 * nbytes, 0)))  # a swap: both ways
        self.ring.free_at[peer] = done
        slot = self._slot = _Slot(done)
        book = self.ring.books[peer]

        def land(to_passive: torch.Tensor) -> None:
            if me in world.left or other in world.left:
                slot.lost = True  # elastic: a side left mid-transfer
                world.swaps_lost += 1
            else:
                book.receive(to_passive)
            slot.landed = True

        def serve() -> None:
            if me in world.left or other in world.left:
                slot.lost = True
                world.swaps_lost += 1
                return
            mine, theirs = book.current(), snapshot
            if self.index in codecs:  # --compress: the decoded vectors, as the processes'
                theirs = codecs[self.index].compress(snapshot)[1]
                mine = codecs[peer].compress(mine)[1]
            to_passive = half_difference_(theirs.clone(), mine)
            slot.delta = half_difference_(mine, theirs)
            clock.at(done, lambda: land(to_passive))

        clock.at(begin, serve)

    def wait(self) -> torch.Tensor | None:
        """This learner's delta; None if the swap was lost with a peer that left."""
        slot, self._slot = self._slot, None
        assert slot is not None
        world = self.comm.world
        clock = world.clock
        while not slot.ready(world.elastic) or slot.done > clock.now:
            self.comm.wait(clock.wait_until(self.comm.rank, slot.done))
        return None if slot.lost else slot.delta

    def publish(self, weights: torch.Tensor, ready: Ready = None) -> None:
        self.ring.books[self.index].publish(weights, ready)

    def take_pending(self) -> tuple[torch.Tensor | None, int]:
        return self.ring.books[self.index].take()

    def finish(self) -> None:
        """Nothing in flight: every learner met at ``wait_all_finished`` after merging its
        own, and the passive sides' deltas landed by then."""

    def retire(self) -> None:
        """Elastic: a new ring replaces this one; nothing runs beside the learner to stop
        (a swap still landing on this passive book is merged from it, as on processes)."""

    def join(self, timeout_s: float) -> None:
        """Nothing to join: no thread."""


@dataclass
class SimServer:
    """The outer state on learner ``host``, and when its server is done with the push it
    serves (it serves one at a time, as the real server thread does)."""

    host: int
    state: OuterState
    free_at: float = 0.0


class SimOuterLink:
    """One learner's way to the outer state (see :class:`asrdist.parallel.transport.OuterLink`):
    a push travels to the host (the speed model's link), is applied when it arrives and the
    global weights travel back; the host's own pushes cost nothing and wait for nobody."""

    def __init__(self, comm: SimTransport, server: SimServer) -> None:
        self.comm, self.server = comm, server
        self._pulled_at = comm.world.clock.now

    def push_pull(self, pseudo_grad: torch.Tensor, steps: int,
                  payload: torch.Tensor | None = None) -> tuple[torch.Tensor, int, int]:
        world, clock, rank = self.comm.world, self.comm.world.clock, self.comm.rank
        server, host = self.server, self.server.host
        seconds = clock.now - self._pulled_at
        if rank == host:
            reply = server.state.push(rank, pseudo_grad, steps, seconds)
            self._pulled_at = clock.now
            return reply
        back = pseudo_grad.numel() * pseudo_grad.element_size()  # the weights, float32
        there = back if payload is None else payload.numel() * payload.element_size()
        begin = max(clock.now, server.free_at)
        arrive = begin + world.speed.send_s(there, rank, host)
        done = arrive + world.speed.send_s(back, host, rank)
        server.free_at = done
        cross = world.speed.node(rank) != world.speed.node(host)
        world.sent(*((0, there + back) if cross else (there + back, 0)))
        got: list[tuple[torch.Tensor, int, int]] = []
        clock.at(arrive, lambda: got.append(server.state.push(rank, pseudo_grad, steps,
                                                              seconds)))
        while not got or done > clock.now:
            self.comm.wait(clock.wait_until(rank, done))
        self._pulled_at = clock.now
        return got[0]

    def finish(self) -> None:
        """Nothing in flight: every push returned with its reply."""
