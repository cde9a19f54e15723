"""The central outer state of a fail-stop run: a server thread on its host learner.

Asynchronous DiLoCo (:mod:`asrdist.parallel.strategies.async_diloco`) keeps one global copy of the
weights and its outer optimizer's state on one learner, the *host* (learner 0). Every other
learner reaches it over a gloo group of its own, by point-to-point messages, as ADPSGD's
exchange does (:mod:`asrdist.parallel.processes.exchange`):

- a learner's push sends a header ``[PUSH, rank, steps, microseconds]`` and its flat float32
  pseudo-gradient (with ``--compress``: the codec's payload, which the host decodes), then
  receives a reply header ``[next steps, staleness]`` and the global weights (float32) after
  its push; its compute thread waits for that reply (a block's end), no other learner does;
- the host's server thread receives whichever header comes first (receive from any source),
  then that learner's pseudo-gradient, applies it to the state and replies; one push at a time;
- the host's own pushes call the state directly (it is locked against the server thread);
- at the end every other learner sends ``[DONE, rank, 0, 0]``; the host's :meth:`finish` waits
  until all have, so every push is applied before the final average.

Elastic runs (``--elastic``) do not use this module: their outer state lives in the run's
store process (:mod:`asrdist.parallel.processes.outer_server`), so that learner 0 can be lost too.

All tensors here are on the CPU: the state lives there, a GPU learner copies its
pseudo-gradient out and the global weights in, once per block. The thread waits for headers
without a deadline (a block may take longer than ``--exchange-timeout``); a learner that dies
is caught by the liveness thread (fail-stop: the job ends naming it), a transfer that stalls
by ``timeout_s``.
"""

from __future__ import annotations

import io
import json
import multiprocessing
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager, nullcontext, suppress
from multiprocessing.connection import Client
from typing import Any

import torch
import torch.distributed as dist

from asrdist.errors import AsrdistError, first_line
from asrdist.parallel.processes.exchange import ExchangeFailure, _wait
from asrdist.parallel.processes.health import abort
from asrdist.parallel.processes.outer_server import HEADER_MAX, send_message, set_deadline
from asrdist.parallel.rules.compress import Codec
from asrdist.parallel.transport import OuterState

KIND_PUSH, KIND_DONE = 1, 3
TAG_HEADER, TAG_PUSH, TAG_REPLY_HEADER, TAG_REPLY = 21, 22, 23, 24
_IDLE = 30 * 86400.0  # seconds: a header may be a whole block away


class ProcessOuterLink:
    """This learner's side of the outer state held by ``host`` over ``group`` (all learners,
    group ranks = global ranks); ``state`` is the host's (None elsewhere); ``codec`` decodes
    compressed pushes on the host; ``blocked`` wraps the compute thread's waits (timing,
    failure naming)."""

    def __init__(self, *, group: dist.ProcessGroup, rank: int, world_size: int, host: int,
                 state: OuterState | None, timeout_s: float, codec: Codec | None = None,
                 blocked: Callable[[], AbstractContextManager[None]] = nullcontext) -> None:
        self.group, self.rank, self.world_size, self.host = group, rank, world_size, host
        self.timeout = timeout_s
        self.state, self.codec = state, codec
        self.sent_bytes = 0  # what this learner sent: its pushes; the host: its replies
        self._blocked = blocked
        self._pending = {r for r in range(world_size) if r != host}  # host: not yet DONE
        self._pulled_at = time.monotonic()
        self._weights: torch.Tensor | None = None  # replies land here (made at the first)
        self._thread: threading.Thread | None = None
        if rank == host:
            if state is None:
                raise ValueError("the host of an outer state must hold it")
            self._thread = threading.Thread(target=self._serve_all, name="asrdist-outer",
                                            daemon=True)
            self._thread.start()

    # -- the compute thread -----------------------------------------------------------------

    def push_pull(self, pseudo_grad: torch.Tensor, steps: int,
                  payload: torch.Tensor | None = None) -> tuple[torch.Tensor, int, int]:
        """Push this block's pseudo-gradient (``steps`` local steps; ``payload``: its encoding,
        sent instead); returns the global weights after it (CPU), the next block's steps and
        the staleness."""
        seconds = time.monotonic() - self._pulled_at
        grad = pseudo_grad.detach().float().cpu().contiguous()
        if self.rank == self.host:
            assert self.state is not None
            reply = self.state.push(self.rank, grad, steps, seconds)
        else:
            sent = grad if payload is None else payload.detach().cpu().contiguous()
            reply = self._remote(sent, grad.numel(), steps, seconds)
        self._pulled_at = time.monotonic()
        return reply

    def _remote(self, sent: torch.Tensor, numel: int, steps: int,
                seconds: float) -> tuple[torch.Tensor, int, int]:
        header = torch.tensor([KIND_PUSH, self.rank, steps, round(seconds * 1e6)],
                              dtype=torch.int64)
        answer = torch.zeros(2, dtype=torch.int64)
        if self._weights is None:
            self._weights = torch.zeros(numel)
        what = f"push to the outer state on learner {self.host} failed"
        with self._blocked():  # fail-stop: a failed post names the lost learner there
            try:
                works = [self.group.send([header], self.host, TAG_HEADER),
                         self.group.send([sent], self.host, TAG_PUSH),
                         self.group.recv([answer], self.host, TAG_REPLY_HEADER),
                         self.group.recv([self._weights], self.host, TAG_REPLY)]
                for work in works:
                    _wait(work, self.timeout, what)
            except ExchangeFailure as exc:
                abort(self.rank, f"{exc}; ending the job")
        self.sent_bytes += sent.numel() * sent.element_size()
        return self._weights.clone(), int(answer[0]), int(answer[1])

    def finish(self) -> None:
        """Another learner: tell the host this learner pushes no more. The host: wait until
        every other learner has told it (all pushes are applied then)."""
        if self.rank != self.host:
            header = torch.tensor([KIND_DONE, self.rank, 0, 0], dtype=torch.int64)
            with self._blocked():
                try:
                    _wait(self.group.send([header], self.host, TAG_HEADER), self.timeout,
                          f"telling the outer state on learner {self.host} failed")
                except ExchangeFailure as exc:
                    abort(self.rank, f"{exc}; ending the job")
            return
        assert self._thread is not None
        with self._blocked():
            while self._thread.is_alive() and self._pending:
                self._thread.join(0.05)

    # -- the host's server thread -----------------------------------------------------------

    def _serve_all(self) -> None:
        try:
            self._serve()
        except ExchangeFailure as exc:
            abort(self.rank, f"{exc}; ending the job")
        except RuntimeError as exc:  # gloo may also fail when a transfer is posted
            abort(self.rank, f"outer state: {first_line(exc)}; ending the job")

    def _serve(self) -> None:
        assert self.state is not None
        pending = self._pending
        header = torch.zeros(4, dtype=torch.int64)
        numel = self.state.numel
        grad = torch.zeros(numel) if self.codec is None else \
            torch.zeros(self.codec.wire_bytes(numel), dtype=torch.uint8)
        while pending:
            _wait(self.group.recv_anysource([header], TAG_HEADER), _IDLE,
                  "waiting for a push")
            kind, sender, steps, micros = (int(v) for v in header)
            if kind == KIND_DONE:
                pending.discard(sender)
                continue
            self._serve_one(sender, grad, steps, micros / 1e6)

    def _serve_one(self, sender: int, grad: torch.Tensor, steps: int, seconds: float) -> None:
        """Receive ``sender``'s pseudo-gradient, apply it, send the reply."""
        assert self.state is not None
        what = f"push from learner {sender} failed"
        _wait(self.group.recv([grad], sender, TAG_PUSH), self.timeout, what)
        if self.codec is not None:
            grad = self.codec.decode(grad, self.state.numel)
        weights, next_steps, stale = self.state.push(sender, grad, steps, seconds)
        answer = torch.tensor([next_steps, stale], dtype=torch.int64)
        sends = [self.group.send([answer], sender, TAG_REPLY_HEADER),
                 self.group.send([weights], sender, TAG_REPLY)]
        for work in sends:
            _wait(work, self.timeout, what)
        self.sent_bytes += weights.numel() * weights.element_size()


class StoreOuterLink:
    """Learner ``rank``'s way to the outer state served at ``address`` (with ``key``).
    ``state``: this learner's starting state (the learners' mean and the options), sent if
    the server has none yet; ``codec`` as :class:`~asrdist.parallel.processes.outer_link.
    ProcessOuterLink`'s; ``blocked`` wraps the waits (timing). A failure ends the learner
    with one line: the store process is gone, and the run with it."""

    def __init__(self, *, rank: int, address: tuple[str, int], key: bytes,
                 state: OuterState, timeout_s: float, codec: Codec | None = None,
                 blocked: Callable[[], AbstractContextManager[None]] = nullcontext) -> None:
        self.rank, self.timeout = rank, timeout_s
        self.codec, self._blocked = codec, blocked
        self.sent_bytes = 0
        self._numel = state.numel
        self._weights = torch.zeros(state.numel)
        self._pulled_at = time.monotonic()
        self._finished = False
        where = f"{address[0]}:{address[1]}"
        with _failing(self.rank, f"reaching the outer state at {where}"):
            self._conn = Client(address, authkey=key)
            set_deadline(self._conn, timeout_s)
            answer = self._ask({"kind": "hello", "rank": rank})
            if answer["init"]:
                start = self._start(state)
                answer = self._ask({"kind": "init"}, start)
                self.sent_bytes += len(start)
        self.token: str = answer["token"]

    def _start(self, state: Any) -> bytes:
        """What the server builds its state from: w_g, AsyncOuter's options, the codec."""
        buffer = io.BytesIO()
        torch.save({"weights": state.weights.float().cpu(), "config": state.options(),
                    "compress": self.codec.name if self.codec else "",
                    "block": self.codec.block if self.codec else 0}, buffer)
        return buffer.getvalue()

    def _ask(self, message: Mapping[str, Any], body: Any = None) -> dict[str, Any]:
        """Send ``message`` (and ``body``'s bytes) and wait up to the timeout for the JSON
        answer."""
        send_message(self._conn, message)
        if body is not None:
            self._conn.send_bytes(body)
        if not self._conn.poll(self.timeout):
            raise TimeoutError(f"no answer in {self.timeout:.0f} s")
        answer: dict[str, Any] = json.loads(self._conn.recv_bytes(HEADER_MAX))
        return answer

    def push_pull(self, pseudo_grad: torch.Tensor, steps: int,
                  payload: torch.Tensor | None = None) -> tuple[torch.Tensor, int, int]:
        """As :meth:`~asrdist.parallel.processes.outer_link.ProcessOuterLink.push_pull`."""
        seconds = time.monotonic() - self._pulled_at
        grad = pseudo_grad.detach().float().cpu().contiguous()
        sent = grad if payload is None else payload.detach().cpu().contiguous()
        with self._blocked(), _failing(self.rank, "push to the outer state in the store process"):
            answer = self._ask({"kind": "push", "steps": steps, "seconds": seconds,
                                "numel": self._numel,
                                "encoding": self.codec.name if self.codec else "float32"},
                               sent.numpy())
            if "error" in answer:
                abort(self.rank, f"{answer['error']}; ending")
            got = self._conn.recv_bytes_into(self._weights.numpy())
            if got != 4 * self._numel:
                raise ValueError(f"global weights of {got} bytes, not {4 * self._numel}")
        self.sent_bytes += sent.numel() * sent.element_size()
        self._pulled_at = time.monotonic()
        return self._weights.clone(), int(answer["steps"]), int(answer["stale"])

    def save(self, step: int) -> None:
        """The server writes the state under its run dir (this learner's checkpoint at
        ``step``); an error there (a full disk) is this learner's AsrdistError."""
        answer = self._request({"kind": "save", "step": step}, "saving the outer state")
        self.token = answer["token"]

    def load(self, token: str) -> None:
        """The server resumes the state of the run ``token`` saved under its run dir."""
        answer = self._request({"kind": "load", "token": token}, "resuming the outer state")
        self.token = answer["token"]

    def _request(self, message: Mapping[str, Any], what: str) -> dict[str, Any]:
        with self._blocked(), _failing(self.rank, f"{what} in the store process"):
            answer = self._ask(message)
        if "error" in answer:
            raise AsrdistError(f"--elastic diloco-async: {answer['error']}")
        return answer

    def finish(self) -> None:
        """Tell the server this learner pushes no more, and close (once)."""
        if self._finished:
            return
        self._finished = True
        with suppress(OSError):  # the server gone: nothing is left to tell it
            send_message(self._conn, {"kind": "done"})
        self._conn.close()


@contextmanager
def _failing(rank: int, what: str) -> Iterator[None]:
    """A failed exchange with the server ends learner ``rank``, naming ``what`` failed."""
    try:
        yield
    except (OSError, EOFError, ValueError, multiprocessing.ProcessError) as exc:
        abort(rank, f"{what} failed: {first_line(exc) or type(exc).__name__} (the run's "
                    "store process, which holds it, is gone or did not answer within "
                    "--exchange-timeout); ending the job")
