"""The transport of real learner processes: torch.distributed (gloo for CPU learners; for CUDA
learners one default group sending CUDA tensors over NCCL and CPU tensors over gloo, see
:func:`asrdist.parallel.launch.rendezvous.choose_backend`), under any launcher, with what a learner
process needs beside its collectives, each from its own
module: liveness and fail-stop (health), slow-learner injection (slow), timing metrics
(timing), the sampled distance to the learners' mean (distance), DDP and its reducers' release
(ddp), ADPSGD's exchange thread (exchange), the thread of the started compressed means
(compress_thread).

With one learner (a world of one) nothing here communicates, so a strategy reduces to the
trainer's plain SGD.

Elastic runs (``--elastic``, :mod:`asrdist.parallel.processes.membership`): the exchanges run on
gloo groups made by the ring's members alone, one per membership (a new one when a member left),
the final average and the stop flag on a group of the survivors, and the distance to the mean
is not sampled (its collective needs every learner). Their store is served by a process of its
own (:mod:`asrdist.parallel.processes.storehost`), told at :meth:`ProcessTransport.close` that this
learner is done with it.
"""

from __future__ import annotations

import dataclasses
import time
import weakref
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist
from torch.distributed.algorithms.model_averaging.utils import average_parameters
from torch.nn.parallel import DistributedDataParallel

from asrdist.errors import first_line
from asrdist.parallel.options import ProcessOptions
from asrdist.parallel.processes import storehost
from asrdist.parallel.processes.average import average_tensors
from asrdist.parallel.processes.compress_thread import CompressThread, MeanJob, compressed_mean_over
from asrdist.parallel.processes.ddp import (
    GradientCodec,
    HookState,
    allreduce_mean_hook,
    release_reducer,
)
from asrdist.parallel.processes.distance import DistanceMonitor
from asrdist.parallel.processes.exchange import PairwiseExchange, make_exchange_group
from asrdist.parallel.processes.health import Liveness, abort, lost_store
from asrdist.parallel.processes.membership import Membership
from asrdist.parallel.processes.outer_link import ProcessOuterLink, StoreOuterLink
from asrdist.parallel.rules.compress import (
    Codec,
    CompressedMean,
    ErrorFeedback,
    GradientCompression,
)
from asrdist.parallel.rules.slow import SlowDown
from asrdist.parallel.rules.timing import StepTimes
from asrdist.parallel.rules.update import Ready
from asrdist.parallel.rules.weights import load_flat_grads, model_device, unflatten_into, unwrap
from asrdist.parallel.strategy import Learner
from asrdist.parallel.transport import OuterState, Transport


def connect(learner: Learner) -> Transport:
    """The transport of ``learner``: the one it came with (the launcher's, the simulator's),
    else torch.distributed's default group with the default process options."""
    if learner.transport is not None:
        return learner.transport
    return ProcessTransport(learner, ProcessOptions())


def with_transport(learner: Learner, options: ProcessOptions) -> Learner:
    """``learner`` with its transport: the one it has, else a process transport under
    ``options`` (made once, and shared by the strategy and the trainer's own collectives)."""
    if learner.transport is not None:
        return learner
    return dataclasses.replace(learner, transport=ProcessTransport(learner, options))


class ProcessTransport(Transport):
    """torch.distributed's default group (initialised when the world has more than one
    learner). A failed collective ends the job, naming the lost learner."""

    def __init__(self, learner: Learner, options: ProcessOptions) -> None:
        self.rank, self.world_size, self.node = learner.rank, learner.world_size, learner.node
        self.timeout_s = options.exchange_timeout
        self._slow = SlowDown.of_learner(options.slow_learner, self.rank)
        self._distance_every_s = options.distance_every
        multi = self.world_size > 1
        # --elastic: taken by the strategies that can go on without a learner (the registry's)
        self.elastic = multi and options.elastic
        self.membership = Membership(self._departures_store(), self.world_size) \
            if self.elastic else None
        # diloco-async's outer state in the store process (a world of one too, when it has one)
        self.outer_elsewhere = options.elastic and storehost.in_use()
        self.liveness = Liveness(self.rank, self.world_size, self.timeout_s,
                                 self.membership) if multi else None
        self._final_group: Any = None  # elastic: the survivors' group, made at the end
        self._distance: DistanceMonitor | None = None
        self._ddps: list[weakref.ref[DistributedDataParallel]] = []
        self._times = StepTimes()
        self._sent_bytes = 0  # since the last metrics (see metrics)
        self._exchanges_made: list[PairwiseExchange] = []
        self._exchange_bytes_seen = 0
        self._compression: GradientCodec | None = None  # ssgd's --compress
        self._grad_group_size = 1
        self._grad_numel = 0
        self._compress_thread: CompressThread | None = None  # made at the first started mean
        self._closed = False

    @staticmethod
    def _departures_store() -> dist.Store:
        """The store process's connection, where it reads the departures; else (learner 0
        hosts the store) the default group's store."""
        store = storehost.client()
        return store if store is not None else dist.distributed_c10d._get_default_store()

    @contextmanager
    def _blocked(self) -> Iterator[None]:
        """Time spent blocked on communication; a failed collective ends the job, named."""
        with self._times.waiting():
            try:
                yield
            except RuntimeError as exc:
                assert self.liveness is not None
                self.liveness.end_job(exc)

    # -- around the step --------------------------------------------------------------------------

    def compute_begins(self) -> None:
        if self.liveness is not None:
            self.liveness.progress()
        self._slow.start()
        self._times.begin_compute()

    def compute_ends(self) -> None:
        if self.liveness is not None:
            self.liveness.progress()
        self._times.end_compute(self._slow.stop())

    def note_staleness(self, value: int) -> None:
        self._times.staleness(value)

    def note_step(self, step: int) -> None:
        if self.liveness is not None:
            self.liveness.step = step

    def departed(self) -> dict[int, int]:
        return dict(self.membership.left) if self.membership is not None else {}

    def watch_distance(self, read: Callable[[], torch.Tensor]) -> None:
        if self.world_size > 1 and self._distance_every_s > 0 and not self.elastic:
            self._distance = DistanceMonitor(read, self._distance_every_s, self.timeout_s)

    def metrics(self) -> dict[str, Any]:
        """:class:`asrdist.parallel.rules.timing.StepTimes`' figures, and the last sampled
        distance to the learners' mean."""
        out = self._times.report()
        if self._distance is not None and self._distance.last is not None:
            out["dist_to_mean"] = self._distance.last
        if self.world_size > 1:
            out["sent_bytes"] = self._take_sent()
        return out

    def _take_sent(self) -> int:
        """Bytes this learner sent since the last call: its pairwise exchanges' payloads, and
        for a ring allreduce 2 (n - 1) / n of the vector (what the simulator charges); a
        broadcast's source counts one copy per receiver."""
        total = sum(e.sent_bytes for e in self._exchanges_made)
        sent = self._sent_bytes + total - self._exchange_bytes_seen
        self._sent_bytes, self._exchange_bytes_seen = 0, total
        return sent

    def _ring(self, tensors: Sequence[torch.Tensor], size: int) -> None:
        nbytes = sum(t.numel() * t.element_size() for t in tensors)
        self._sent_bytes += 2 * (size - 1) * nbytes // size

    # -- groups and collectives ---------------------------------------------------------------

    def subgroups(self, partition: list[list[int]]) -> Any:
        group, _ = dist.new_subgroups_by_enumeration(
            partition, timeout=timedelta(seconds=self.timeout_s))
        return group

    def node_names(self) -> list[str] | None:
        names = [""] * self.world_size
        dist.all_gather_object(names, self.node)
        return names

    def gather(self, mine: Any) -> dict[int, Any]:
        if self.world_size == 1:
            return {self.rank: mine}
        everyone: list[Any] = [None] * self.world_size
        with self._blocked():
            dist.all_gather_object(everyone, mine)
        return dict(enumerate(everyone))

    def average_(self, tensors: Sequence[torch.Tensor], group: Any = None) -> None:
        with self._blocked():
            average_parameters(iter(list(tensors)), group)
        self._ring(tensors, self.world_size if group is None else dist.get_world_size(group))

    def average_all_(self, tensors: Sequence[torch.Tensor]) -> None:
        with self._blocked():
            if self.elastic:
                group, size = self._survivors()
                average_tensors(tensors, size, group)
            else:
                size = self.world_size
                average_tensors(tensors, size)
        self._ring(tensors, size)

    def start_average_(self, tensors: Sequence[torch.Tensor], group: Any = None) -> _Started:
        """torch's ``average_parameters`` (each share divided, then one flat allreduce), its
        allreduce asynchronous: its result is copied into ``tensors`` at the wait."""
        tensors = list(tensors)
        size = self.world_size if group is None else dist.get_world_size(group)
        flat = torch.cat([t.detach().reshape(-1) for t in tensors])
        flat /= size
        with self._blocked():
            work = dist.all_reduce(flat, group=group, async_op=True)
        self._ring([flat], size)
        return _Started(self, work, flat, tensors)

    def compressed_mean_(self, vector: torch.Tensor, side: CompressedMean) -> None:
        """The reduce-scatter as one all-to-all of the chunk payloads, then an all-gather of
        the mean chunks (fail-stop runs: an elastic one has no compressed collective)."""
        with self._blocked():
            compressed_mean_over(None, vector, side)
        self._sent_bytes += side.sent_bytes(vector.numel())

    def start_compressed_mean_(self, vector: torch.Tensor,
                               side: CompressedMean) -> _StartedCompressed:
        """:meth:`compressed_mean_` run by a communication thread on a gloo group of its own
        (:mod:`asrdist.parallel.processes.compress_thread`), both made at the first call (every
        learner makes it there: the started means come in the same order on all)."""
        if self._compress_thread is None:
            with self._blocked():
                group = make_exchange_group(list(range(self.world_size)), self.timeout_s)
            self._compress_thread = CompressThread(group)
        self._sent_bytes += side.sent_bytes(vector.numel())
        return _StartedCompressed(self, self._compress_thread,
                                  self._compress_thread.start(vector, side))

    def _survivors(self) -> tuple[Any, int]:
        """Elastic: the group of the learners that finished (every other one was dropped:
        call after :meth:`wait_all_finished`), made once, and its size."""
        assert self.membership is not None
        if self._final_group is None:
            ranks = self.membership.survivors()
            self._final_group = (self.membership.group("final", ranks, self.timeout_s),
                                 len(ranks))
        return self._final_group

    def broadcast_(self, tensor: torch.Tensor, src: int, group: Any = None) -> None:
        with self._blocked():
            dist.broadcast(tensor, src=src, group=group)
        if self.rank == src:
            size = self.world_size if group is None else dist.get_world_size(group)
            self._sent_bytes += (size - 1) * tensor.numel() * tensor.element_size()

    def any_(self, flag: bool) -> bool:
        """Whether any learner's ``flag`` is set. A control collective: its tensor is on the
        CPU whatever the model's device, so gloo carries it (NCCL cannot reduce CPU tensors)."""
        value = torch.tensor([1.0 if flag else 0.0], device="cpu")
        with self._blocked():
            if self.elastic:
                opts = dist.AllreduceOptions()
                opts.reduceOp = dist.ReduceOp.MAX
                self._survivors()[0].allreduce([value], opts).wait()
            else:
                dist.all_reduce(value, op=dist.ReduceOp.MAX)
        return value.item() > 0

    def gradient_compression(self, name: str, rank: int, error_feedback: bool = True,
                             powersgd_rank: int = 1) -> GradientCodec:
        return GradientCodec(name, self.world_size, rank, error_feedback, powersgd_rank)

    def gradient_mean(self, model: torch.nn.Module, group: Any = None,
                      compression: GradientCompression | None = None) -> torch.nn.Module:
        """DistributedDataParallel over ``group``, its allreduce hook naming a lost learner
        (``compression``: its hook, see :class:`~asrdist.parallel.processes.ddp.GradientCodec`); its
        reducer is released in :meth:`close`."""
        if compression is not None and not isinstance(compression, GradientCodec):
            raise TypeError(f"{type(compression).__name__} is not this transport's: make it "
                            "with gradient_compression()")
        assert self.liveness is not None
        device = model_device(model)
        ddp = DistributedDataParallel(model, device_ids=[device] if device is not None else None,
                                      process_group=group)
        size = self.world_size if group is None else dist.get_world_size(group)
        state = HookState(self.liveness, group, size)
        if compression is None:
            ddp.register_comm_hook(state, allreduce_mean_hook)
        else:
            compression.register(ddp, state)
        self._compression = compression
        self._grad_group_size = size
        self._grad_numel = sum(p.numel() for p in model.parameters())  # counted once
        self._ddps.append(weakref.ref(ddp))  # weak: a wrapper gone needs no release
        return ddp

    def gradients_averaged(self, model: torch.nn.Module) -> None:
        """DDP's reducer averaged them during backward, but with a codec of asrdist's own,
        whose mean of the flat gradient runs here."""
        codec = self._compression
        if codec is None or codec.side is None:
            if codec is not None or self._grad_group_size > 1:
                numel = self._grad_numel
                nbytes = numel * 4 if codec is None else codec.wire_bytes(numel)
                self._sent_bytes += 2 * (self._grad_group_size - 1) * nbytes \
                    // self._grad_group_size
            return
        params = list(unwrap(model).parameters())
        if any(p.grad is None for p in params):
            raise RuntimeError("a parameter got no gradient: a gradient mean needs every "
                               "parameter in the loss")
        with torch.no_grad():
            flat = torch.cat([p.grad.reshape(-1).float() for p in params])
            self.compressed_mean_(flat, codec.side)
            load_flat_grads(params, flat)

    def pairwise(self, ranks: list[int], index: int | None, weights: torch.Tensor | None,
                 ready: Ready, alloc: Callable[[int], torch.Tensor],
                 partner_of: Callable[[int], int], start_round: int,
                 codec: ErrorFeedback | None = None) -> PairwiseExchange | None:
        """:class:`~asrdist.parallel.processes.exchange.PairwiseExchange` over a gloo group of its
        own (elastic: made by the ring's members alone, and called again for each new ring)."""
        if not self.elastic:
            group = make_exchange_group(ranks, self.timeout_s)
        if index is None or weights is None or len(ranks) < 2:
            return None
        if self.elastic:
            group = self._ring_group(ranks)
            if group is None:
                return None
        exchange = PairwiseExchange(group=group, ranks=ranks, index=index, weights=weights,
                                    ready=ready, alloc=alloc, partner_of=partner_of,
                                    timeout_s=self.timeout_s, rank=self.rank,
                                    start_round=start_round, blocked=self._blocked,
                                    codec=codec, **self._elastic_hooks())
        self._exchanges_made.append(exchange)
        return exchange

    def _elastic_hooks(self) -> dict[str, Any]:
        """Elastic: how an exchange drops a lost peer and sees its ring lose a member."""
        if self.membership is None or self.liveness is None:
            return {}
        return {"lose": self.liveness.drop, "left": self.membership.left}

    def _ring_group(self, ranks: list[int]) -> Any:
        """Elastic: the ring's group, made by its members; None if a member is lost while it
        is made (the caller's ring is out of date: the next step builds the new one)."""
        assert self.membership is not None and self.liveness is not None
        try:
            return self.membership.group("ring", ranks, self.timeout_s)
        except RuntimeError as exc:  # a member lost: the liveness thread drops it soon
            deadline = time.monotonic() + self.timeout_s
            while time.monotonic() < deadline:
                if any(r in self.membership.refresh() for r in ranks):
                    return None
                time.sleep(self.liveness.interval_s)
            self.liveness.end_job(exc)
            raise

    def outer_server(self, state: OuterState | None, host: int,
                     codec: Codec | None = None) -> ProcessOuterLink | StoreOuterLink:
        """Elastic: :class:`~asrdist.parallel.processes.outer_link.StoreOuterLink`, to the state in
        the store process; else :class:`~asrdist.parallel.processes.outer_link.ProcessOuterLink`
        over a gloo group of its own, the state on ``host``."""
        if self.outer_elsewhere:
            assert state is not None
            address, key = storehost.outer_address()
            store_link = StoreOuterLink(rank=self.rank, address=address, key=key, state=state,
                                        timeout_s=self.timeout_s, codec=codec,
                                        blocked=self._times.waiting)
            self._exchanges_made.append(store_link)  # type: ignore[arg-type]  # sent_bytes
            return store_link
        group = make_exchange_group(list(range(self.world_size)), self.timeout_s)
        link = ProcessOuterLink(group=group, rank=self.rank, world_size=self.world_size,
                                host=host, state=state if self.rank == host else None,
                                timeout_s=self.timeout_s, codec=codec, blocked=self._blocked)
        self._exchanges_made.append(link)  # type: ignore[arg-type]  # its sent_bytes count
        return link

    # -- leaving ---------------------------------------------------------------------------------

    def wait_all_finished(self, between: Callable[[], None] | None = None) -> None:
        assert self.liveness is not None
        try:
            self.liveness.wait_all_finished(between=between)
        except (RuntimeError, OSError) as exc:  # the store is gone with its process
            abort(self.rank, f"{lost_store()}: {first_line(exc)}", post=False)

    def stop_services(self) -> None:
        if self._distance is not None:
            self._distance.stop()
            self._distance = None
        if self.liveness is not None:
            self.liveness.stop()

    def abandon(self) -> None:
        """The distance thread, whose next collective waits for the others' next sample, is
        told to stop but not waited for."""
        if self._distance is not None:
            self._distance.stop(wait=False)
            self._distance = None

    def close(self) -> None:
        """Stop the threads and release the DDP reducers (see
        :func:`asrdist.parallel.processes.ddp.release_reducer`); call it before
        ``destroy_process_group``; once (the strategy and the launcher both close it)."""
        if self._closed:
            return
        self._closed = True
        self.stop_services()
        for ref in self._ddps:
            ddp = ref()
            if ddp is not None:
                release_reducer(ddp)
        self._ddps = []
        if self._compress_thread is not None:
            self._compress_thread.close(self.timeout_s)
        if storehost.in_use():  # its last use of the store: the store process ends once
            storehost.leave(self.rank)  # every learner closed or left


class _Started:
    """An allreduce of :meth:`ProcessTransport.start_average_` in flight."""

    def __init__(self, comm: ProcessTransport, work: Any, flat: torch.Tensor,
                 tensors: list[torch.Tensor]) -> None:
        self._comm, self._work, self._flat, self._tensors = comm, work, flat, tensors

    def wait(self) -> None:
        """Block until the allreduce is done (a failure ends the job, named), then copy the
        mean into the tensors; once."""
        if self._work is None:
            return
        with self._comm._blocked():
            self._work.wait()
        self._work = None
        unflatten_into(self._tensors, self._flat)


class _StartedCompressed:
    """A mean of :meth:`ProcessTransport.start_compressed_mean_` in flight."""

    def __init__(self, comm: ProcessTransport, thread: CompressThread, job: MeanJob) -> None:
        self._comm, self._thread = comm, thread
        self._job: MeanJob | None = job

    def wait(self) -> None:
        """Block until the thread has the mean in the vector (a failure ends the job, named);
        once."""
        if self._job is None:
            return
        with self._comm._blocked():
            self._thread.wait(self._job)
        self._job = None
