"""The pairwise weight-exchange engine of ADPSGD: one communication thread per learner.

Each learner's weights travel as one flat float32 vector over a gloo process group of its own
(created with ``timeout=``: new groups do not inherit the default group's), used by this
thread only. Every vector an exchange uses is made once, with the exchange; on a GPU the
arithmetic runs on the device and only gloo's transfer touches host memory, through a pinned
pair (:mod:`asrdist.parallel.rules.staging`, which says how the streams are ordered). Roles come
from :mod:`asrdist.parallel.rules.rings` and never change:

- an *active* learner's thread takes one job per step (a snapshot ``s_a`` of its weights),
  sends a header to the passive partner the ring schedule names, then swaps weights with it by
  ``isend``/``irecv`` posted together (two blocking sends would deadlock on large tensors), and
  returns the delta ``(s_p - s_a) / 2``;
- a *passive* learner's thread serves whichever header arrives first (receive from any
  source), swaps its current weights ``s_p`` with that active learner and accumulates the delta
  ``(s_a - s_p) / 2`` until its compute thread merges it.

The two deltas are exact negatives, so every exchange leaves the sum of all weights unchanged
even when a learner's weights moved (an optimizer step) between its snapshot and the merge;
with nothing in between it is exactly ``w_a, w_p <- (w_a + w_p) / 2``.

Deadlock freedom: an active thread waits only on a passive one, a passive thread only on the
active learner it is serving, so no cycle of waits can form. Leaving the loop: every active
learner ends with a DONE header to every passive one, and a passive thread returns after
receiving DONE from all active learners, so all agree when to stop. While idle, active threads
send PING headers, so a passive learner that hears from an active one for ``timeout_s`` knows
it is gone. Every wait has ``timeout_s``; a failed or timed-out exchange ends the learner's
process with a message naming the peer (fail-stop, see :mod:`asrdist.parallel.processes.health`).

Elastic runs (``lose`` given): a failed or timed-out exchange drops the peer instead
(:meth:`asrdist.parallel.processes.health.Liveness.drop`) and ends only this thread; the strategy
then builds a new exchange over the survivors and *retires* this one (:meth:`retire`): a retired
active thread sends DONE to the passive members still there and leaves, a retired passive
one serves until every active member still there has sent it DONE (its deltas are merged
with the strategy's next merge), and a failure on a retired ring drops nobody. An active
thread that ends on a lost peer still sends DONE to the other passive members, which would
otherwise wait for it until their timeout. A passive thread left waiting only for dropped
active members is not waited for at the end: gloo cannot interrupt a receive (a timed-out
wait breaks the whole group), so it leaves at its timeout or with the process. An active
learner waiting for an exchange with a dropped peer gives it up (that peer may have merged
its side: a small step off the learners' mean, once per departure).

Why gloo for the weights, on GPUs too: the headers need gloo's receive from any source; a
failed or silent peer must raise here (elastic runs drop it), while NCCL's watchdog aborts the
process and a communicator with a lost member cannot be rebuilt without it; and NCCL point to
point would need a communicator per pair a random ring can name. Its cost is bandwidth: TCP,
not NVLink or InfiniBand, bounds how fast the exchanges go (the compute stream does not pay
it: the step merges an exchange only when it is done).
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager, nullcontext
from datetime import timedelta
from functools import partial

import torch
import torch.distributed as dist

from asrdist.errors import first_line
from asrdist.parallel.processes.health import abort
from asrdist.parallel.rules import rings
from asrdist.parallel.rules.compress import ErrorFeedback
from asrdist.parallel.rules.staging import Event, Link
from asrdist.parallel.rules.update import PassiveBook, Ready, half_difference_

KIND_EXCHANGE, KIND_PING, KIND_DONE = 1, 2, 3
TAG_HEADER, TAG_TO_PASSIVE, TAG_TO_ACTIVE = 11, 12, 13


class ExchangeFailure(RuntimeError):
    """An exchange with a named learner failed or timed out."""


def _wait(work: dist.Work, timeout_s: float, what: str) -> None:
    try:
        ok = work.wait(timeout=timedelta(seconds=timeout_s))
    except RuntimeError as exc:
        raise ExchangeFailure(f"{what}: {first_line(exc)}") from exc
    if ok is False:
        raise ExchangeFailure(f"{what}: no answer within {timeout_s:.0f} s")


class PairwiseExchange:
    """Pairwise averaging with ring partners, run by one background thread.

    ``ranks[i]`` is the global rank of ring member ``i``; this learner is member ``index``.
    ``partner_of(round)`` gives an active member's partner index for its ``round``-th exchange;
    ``weights`` (flat, on the model's device) are what a passive learner serves until its first
    ``publish``, and give every learner the size and device of its vectors; ``ready`` and
    ``alloc`` are as for :class:`~asrdist.parallel.rules.update.PassiveBook` (a model's staging,
    :mod:`asrdist.parallel.rules.staging`); ``blocked`` wraps the compute thread's wait.
    ``group`` ranks are ring indices (``ranks`` sorted). Elastic: ``lose(rank, why)`` drops a
    learner whose exchange failed; ``left`` holds the learners dropped so far (by rank, kept up
    to date by the liveness thread).
    """

    def __init__(
        self,
        *,
        group: dist.ProcessGroup,
        ranks: list[int],
        index: int,
        weights: torch.Tensor,
        ready: Ready = None,
        alloc: Callable[[int], torch.Tensor] | None = None,
        partner_of: Callable[[int], int] | None,
        timeout_s: float,
        rank: int,
        start_round: int = 0,
        blocked: Callable[[], AbstractContextManager[None]] = nullcontext,
        lose: Callable[[int, str], None] | None = None,
        left: Mapping[int, int] | None = None,
        codec: ErrorFeedback | None = None,
    ) -> None:
        self.group, self.ranks, self.index = group, ranks, index
        self.n = len(ranks)
        self.active = rings.is_active(index)
        self.timeout_s = timeout_s
        self.rank = rank  # this learner's global rank, for messages
        self.round = start_round
        self.exchanges = 0
        self._partner_of = partner_of
        self._blocked = blocked
        self._lose = lose  # elastic: drops a lost peer
        self._left: Mapping[int, int] = left if left is not None else {}  # elastic: dropped
        self._retired = False
        self._lock = threading.Lock()
        self._jobs: queue.Queue[tuple[torch.Tensor, Ready] | None] = queue.Queue()
        self._results: queue.Queue[tuple[torch.Tensor, Event]] = queue.Queue()
        self._in_flight = 0
        self._peer: int | None = None  # ring member being talked to, for error messages
        self._told: set[int] = set()  # active: passive members sent DONE
        self._waiting = set(rings.actives(self.n))  # passive: active members not yet DONE
        # made once, reused by every exchange: the thread's own vectors on the model's device
        # (on CPU gloo reads and writes them directly) and the pinned pair of a GPU
        self._link = Link(weights.device, weights.numel())
        self._lane = self._link.lane
        self._theirs = self._lane.zeros(weights.numel())  # received; then the delta
        self._mine = None if self.active else self._lane.zeros(weights.numel())  # served
        self._book = None if self.active else PassiveBook(weights, ready, alloc)  # _lock
        # --compress: the encoding of what is sent (the thread's alone) and a host inbox
        self._codec = codec
        self._inbox = None if codec is None else \
            torch.empty(codec.codec.wire_bytes(weights.numel()), dtype=torch.uint8)
        self.sent_bytes = 0  # sent by this thread so far (the transport's metrics)
        loop = self._active_loop if self.active else self._passive_loop
        self._thread = threading.Thread(target=self._guard(loop), name="asrdist-exchange",
                                        daemon=True)
        self._thread.start()

    # -- compute-thread API ------------------------------------------------------------------

    def start(self, snapshot: torch.Tensor, ready: Ready = None) -> None:
        """Active: begin this step's exchange of ``snapshot`` (returns at once; the snapshot is
        read until :meth:`wait` returns); the thread calls ``ready`` (on the stream that reads
        it) first."""
        self._in_flight += 1
        self._jobs.put((snapshot, ready))

    @property
    def in_flight(self) -> bool:
        return self._in_flight > 0

    @property
    def finished(self) -> bool:
        """Active: whether the exchange in flight is done, so :meth:`wait` returns at once
        (a step that merges only what is done: bench.exchange_cost)."""
        return not self._results.empty()

    def wait(self) -> torch.Tensor | None:
        """Active: the delta of the exchange in flight, once it is done (inside ``blocked``:
        the transport's timing and failure naming), on the model's device, ordered before
        what the caller's stream queues next; read it before the next :meth:`start`, which
        reuses it. Elastic: None, at once, when the thread ended (its peer was dropped) or the
        ring lost a member (a new ring will be built)."""
        poll_s = 1.0 if self._lose is None else 0.05
        with self._blocked():
            while True:
                try:
                    delta, done = self._results.get(timeout=poll_s)
                except queue.Empty:
                    ended = not self._thread.is_alive()
                    if self._lose is not None and (ended or self._changed()):
                        self._in_flight = 0
                        return None
                    if ended:
                        raise ExchangeFailure("exchange thread ended unexpectedly") from None
                    continue
                self._in_flight -= 1
                self._lane.wait(done)
                return delta

    def _changed(self) -> bool:
        return any(r in self._left for r in self.ranks)

    def retire(self) -> None:
        """Elastic: a new ring replaces this one. An active thread tells the passive members
        still there it is done (as at the end of a run) and leaves; a passive one leaves once
        every active member still there has; a failure on the way is silent. Join it with
        :meth:`join` before the process ends (no thread may be left waiting in gloo)."""
        self._retired = True
        if self.active:
            self._jobs.put(None)

    def join(self, timeout_s: float | None = None) -> None:
        """Wait (up to ``timeout_s``) for the thread to leave; not for a passive one that waits
        only for dropped learners (none of them will ever send: it would hold the survivors'
        final average for a whole timeout)."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while self._thread.is_alive() and not self._waits_only_on_gone():
            if deadline is not None and time.monotonic() >= deadline:
                return
            self._thread.join(0.05)

    def _waits_only_on_gone(self) -> bool:
        return not self.active and not self._waiting - self._gone()

    def publish(self, weights: torch.Tensor, ready: Ready = None) -> None:
        """Passive: the weights to serve from now on (the compute thread's latest ones, read
        and written by this exchange until the next publish); ``ready`` as for
        :meth:`start`."""
        assert self._book is not None
        with self._lock:
            self._book.publish(weights, ready)

    def take_pending(self) -> tuple[torch.Tensor | None, int]:
        """Passive: the accumulated delta (on the model's device, ordered before what the
        caller's stream queues next; read it before the next take but one) and how many
        exchanges it holds; resets it."""
        assert self._book is not None
        with self._lock, self._lane.math(after_caller=True):
            delta, count = self._book.take()
            done = self._lane.mark()
        self._lane.wait(done)
        return delta, count

    def finish(self) -> None:
        """Leave the loop together: active sends DONE to all passives; passive awaits them."""
        if self.active:
            self._jobs.put(None)
        self.join()

    # -- communication thread ----------------------------------------------------------------

    def _guard(self, loop: Callable[[], None]) -> Callable[[], None]:
        def run() -> None:
            try:
                loop()
            except ExchangeFailure as exc:
                self._failed(f"{exc}")
            except RuntimeError as exc:  # gloo may also fail when a transfer is posted
                peer = "?" if self._peer is None else self._member(self._peer)
                self._failed(f"exchange with {peer} failed: {first_line(exc)}")

        return run

    def _failed(self, why: str) -> None:
        """Fail-stop: end the job, naming the peer. Elastic: drop the peer (unless this ring
        was retired meanwhile) and end this thread only; an active one first tells the other
        passive members still there it is done, as they wait for that."""
        if self._lose is None:
            abort(self.rank, f"{why}; ending the job")
        assert self._lose is not None
        lost = self._peer
        if lost is not None and not self._retired:
            self._lose(self.ranks[lost], why)
        if not self.active:
            return
        for p in rings.passives(self.n):
            if p == lost or p in self._told or self.ranks[p] in self._left:
                continue
            try:
                self._header(KIND_DONE, p)
            except RuntimeError as exc:  # ExchangeFailure too: that member is lost as well
                if not self._retired:
                    self._lose(self.ranks[p], f"exchange with {self._member(p)} failed: "
                                              f"{first_line(exc)}")

    # -- --compress: what crosses the wire is the encoding ------------------------------------

    def _outgoing(self, vector: torch.Tensor,
                  ready: Ready) -> tuple[torch.Tensor, torch.Tensor]:
        """What the receiver will hold for ``vector`` and the payload gloo sends: the link's
        copy of ``vector``, or under --compress ``vector`` encoded with error feedback (decoded
        on the device, the payload on the host; waited for here, as :class:`Link` waits for
        its copies)."""
        if self._codec is None:
            return vector, self._link.outgoing(vector, ready)
        with self._lane.math():
            if ready is not None:
                ready()
            payload, decoded = self._codec.compress(vector)
            done = self._lane.mark(blocking=True)
        if done is not None:
            done.synchronize()
        return decoded, payload.cpu()

    def _receive_into(self, dst: torch.Tensor) -> torch.Tensor:
        """Where gloo receives what is meant for ``dst``: the inbox of encoded bytes, else the
        link's."""
        return self._inbox if self._inbox is not None else self._link.inbox(dst)

    def _landed(self, dst: torch.Tensor) -> None:
        """Bring what was received into ``dst`` (decoded, where it was encoded)."""
        if self._codec is None or self._inbox is None:
            self._link.land(dst)
            return
        with self._lane.math():
            dst.copy_(self._codec.codec.decode(self._inbox, dst.numel()).to(dst.device))

    def _member(self, index: int) -> str:
        return f"learner {self.ranks[index]}"

    def _header(self, kind: int, to: int) -> None:
        self._peer = to
        hdr = torch.tensor([kind, self.index, self.round], dtype=torch.int64)
        work = self.group.send([hdr], to, TAG_HEADER)
        _wait(work, self.timeout_s, f"exchange with {self._member(to)} failed")

    def _active_loop(self) -> None:
        ping_s = self.timeout_s / 4
        while True:
            try:
                job = self._jobs.get(timeout=ping_s)
            except queue.Empty:
                for p in rings.passives(self.n):
                    self._header(KIND_PING, p)
                continue
            if job is None:
                for p in rings.passives(self.n):
                    if self.ranks[p] in self._left:
                        continue
                    self._header(KIND_DONE, p)
                    self._told.add(p)
                return
            snapshot, ready = job
            assert self._partner_of is not None
            peer = self._partner_of(self.round)
            mine, outgoing = self._outgoing(snapshot, ready)
            self._header(KIND_EXCHANGE, peer)
            send = self.group.send([outgoing], peer, TAG_TO_PASSIVE)
            recv = self.group.recv([self._receive_into(self._theirs)], peer, TAG_TO_ACTIVE)
            what = f"exchange with {self._member(peer)} failed"
            _wait(send, self.timeout_s, what)
            _wait(recv, self.timeout_s, what)
            self.sent_bytes += outgoing.numel() * outgoing.element_size()
            self._landed(self._theirs)
            with self._lane.math():
                half_difference_(self._theirs, mine)
                done = self._lane.mark()
            self.round += 1
            self.exchanges += 1
            self._results.put((self._theirs, done))

    def _passive_loop(self) -> None:
        pending_actives = self._waiting
        heard = {a: time.monotonic() for a in pending_actives}
        hdr = torch.empty(3, dtype=torch.int64)
        while pending_actives - self._gone():
            work = self.group.recv_anysource([hdr], TAG_HEADER)
            silent = min(pending_actives, key=heard.__getitem__)
            self._peer = silent
            _wait(work, self.timeout_s, f"no exchange or heartbeat from {self._member(silent)}")
            kind, sender = int(hdr[0]), int(hdr[1])
            now = time.monotonic()
            heard[sender] = now
            if kind == KIND_DONE:
                pending_actives.discard(sender)
            elif kind == KIND_EXCHANGE:
                self._serve(sender)
            for a in pending_actives - self._gone():
                if now - heard[a] > self.timeout_s:
                    self._peer = a
                    raise ExchangeFailure(
                        f"no exchange or heartbeat from {self._member(a)} for "
                        f"{self.timeout_s:.0f} s"
                    )

    def _gone(self) -> set[int]:
        """Ring members dropped (elastic; none otherwise)."""
        return {i for i, r in enumerate(self.ranks) if r in self._left}

    def _serve(self, sender: int) -> None:
        self._peer = sender
        book, mine, theirs = self._book, self._mine, self._theirs
        assert book is not None and mine is not None
        with self._lock, self._lane.math():
            book.current_into(mine)
            made = self._lane.mark()
        mine_sent, outgoing = self._outgoing(mine, partial(self._lane.wait, made))
        recv = self.group.recv([self._receive_into(theirs)], sender, TAG_TO_PASSIVE)
        send = self.group.send([outgoing], sender, TAG_TO_ACTIVE)
        what = f"exchange with {self._member(sender)} failed"
        _wait(recv, self.timeout_s, what)
        _wait(send, self.timeout_s, what)
        self.sent_bytes += outgoing.numel() * outgoing.element_size()
        self._landed(theirs)
        with self._lane.math():
            half_difference_(theirs, mine_sent)  # exact: the active side's delta negated
            with self._lock:
                book.receive(theirs)
        self.exchanges += 1


def make_exchange_group(ranks: list[int], timeout_s: float) -> dist.ProcessGroup:
    """A gloo group for the exchange thread alone (its ranks are the ring indices: ``ranks``
    sorted); every process of the job must call this."""
    if ranks != sorted(ranks):
        raise ValueError(f"ring ranks {ranks} are not sorted")
    return dist.new_group(ranks=ranks, timeout=timedelta(seconds=timeout_s), backend="gloo")
