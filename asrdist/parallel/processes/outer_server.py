"""Elastic diloco-async: the outer state in the run's store process, so that any learner can go.

In a fail-stop run asynchronous DiLoCo's outer state (:class:`asrdist.parallel.rules.async_outer.
AsyncOuter`: w_g and its optimizer's state) lives on learner 0
(:mod:`asrdist.parallel.processes.outer_link`), and losing learner 0 would lose it. An elastic run
already has a process that outlives every learner and ends with the run: the rendezvous
store's (:mod:`asrdist.parallel.processes.storehost`), on learner 0's machine. It serves the outer
state too (:class:`OuterServer`), rather than a process of its own: one more detached process would
need its own start, its own end rules and its own orphan checks, and forking one from a
learner after its process groups and threads exist is unsafe, while the store process is
forked before any of them.

Transport: ``multiprocessing.connection`` over TCP (length-prefixed messages, an HMAC
challenge both ways with a key derived from the run's secret,
:mod:`asrdist.parallel.processes.secret`, which never goes through the store), listening on the
run's named interface alone (:mod:`asrdist.parallel.processes.bind`), not the TCPStore itself: the
store's libuv server refuses a value over 8 MiB (a 17 MB model would have to be cut up), keeps every
value in memory and serves the heartbeats and departures on the same loop, which a 17 MB
transfer would hold up; the store process is no torch.distributed rank, so gloo is out too.
Measured on one 2-core machine's loopback, under load (``bench.outer_push_cost``): 17 MB
each way with ``send_bytes``/``recv_bytes_into`` (the calls used here) 42 ms; a whole push of
a 17 MB model through :class:`~asrdist.parallel.processes.outer_link.StoreOuterLink` (the learners'
side, beside the fail-stop link) and :class:`OuterServer` (transfers, the delayed Nesterov
update on one thread, the reply) 65 ms.
The store has no authentication of its own: a process that reads it learns the server's port,
not its key.

Discovery: a learner sets ``outer/want`` in the store; the store process starts the server at
its next poll (within a second) and publishes ``outer/address`` (its port, signed,
:mod:`asrdist.parallel.processes.signed`; the host is the store's, MASTER_ADDR).

Messages (a JSON header, then for some a binary body): ``hello`` (the learner's rank; the
answer says whether the server still needs its start), ``init`` (the starting w_g, the
AsyncOuter options and the codec: the learners' mean, sent once, by the first learner to say
hello; no other learner's message is read before it has arrived, and if that learner is lost
first the others' first pushes time out and end the run), ``push`` (steps, seconds, the
pseudo-gradient's size and encoding, then its float32 bytes or the codec's payload, each
checked against the state: size, encoding, finite values, or the push is refused naming the
learner and why; the answer: the next block's steps, the staleness and w_g's float32 bytes),
``save``/``load`` (see below), ``done``. One thread serves every connection, one message at
a time, in the order they arrive (whichever connection is readable first), and applies each
push with AsyncOuter's own rules: nothing of the maths is copied here. A push is applied
only once all its bytes arrived: a learner lost during its push leaves the state as it was
(its connection is closed, and the others are not waited on anyway).

Checkpoints: when a learner checkpoints (``save``, carrying the step) the server writes its
whole state atomically to ``RUN_DIR/outer_state.pt``, the run dir it was started with (no
message names a path), with a token drawn at the
start of the run (learners keep it in their checkpoints); a resumed run's learners each send
``load`` with their checkpoint's token, and the first one makes the server load the file
(later ones only check the token). No file, an unreadable one, or one whose token is not the
checkpoint's is a one-line error.

The server ends (stops listening) once every learner said ``done`` or was dropped; the store
process's own rules end the process (:mod:`asrdist.parallel.processes.storehost`).
"""

from __future__ import annotations

import io
import json
import math
import multiprocessing
import os
import secrets
import socket
import struct
import sys
import threading
from collections.abc import Mapping
from contextlib import suppress
from multiprocessing.connection import (
    Connection,
    Listener,
    answer_challenge,
    deliver_challenge,
    wait,
)
from pathlib import Path
from typing import Any

import torch

from asrdist.errors import AsrdistError, first_line
from asrdist.fsutil import write_atomically
from asrdist.parallel.processes import secret
from asrdist.parallel.rules.async_outer import AsyncOuter
from asrdist.parallel.rules.compress import Codec, make_codec

STATE_FILE = "outer_state.pt"  # under the run dir
HEADER_MAX = 1 << 16  # bytes: a JSON header, never a tensor
NO_RUN_DIR = "the run's store process was started without a run dir (--out)"


def set_deadline(conn: Connection, seconds: float) -> None:
    """Make a read or write on ``conn`` that waits longer than ``seconds`` fail (a peer frozen
    mid-message), without touching how long the server waits for a message to begin."""
    tv = struct.pack("ll", int(seconds), int((seconds % 1) * 1e6))
    with socket.socket(fileno=os.dup(conn.fileno())) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, tv)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, tv)


def send_message(conn: Connection, message: Mapping[str, Any]) -> None:
    conn.send_bytes(json.dumps(message).encode())


def outer_key() -> bytes:
    """The server's authkey: the run secret's, so only the run's processes can connect."""
    return secret.derive("outer-server")


class PushRefused(ValueError):
    """A push that does not fit the state (its size, encoding or values)."""


class OuterServer:
    """The outer state of a run of ``world_size`` learners, served from the store process on
    ``host`` (the run's named interface); ``timeout_s``: how long one message may take once
    begun; ``run_dir``: where the state is saved (None: a ``save`` is refused). Starts its
    threads at once."""

    def __init__(self, world_size: int, timeout_s: float, host: str = "127.0.0.1",
                 run_dir: str | os.PathLike | None = None) -> None:
        self.key = outer_key()
        self.run_dir = Path(run_dir).resolve() if run_dir else None
        self._listener = Listener((host, 0))  # each connection authenticated in _accept
        self.port = int(self._listener.address[1])
        self.world_size, self.timeout_s = world_size, timeout_s
        self.state: Any = None  # the AsyncOuter, once a learner sent the start
        self.codec: Codec | None = None
        self.token = ""  # the run's: drawn at the start, or the resumed file's
        self._loaded = False
        self._starter: Connection | None = None  # the learner asked for the start
        self._wire = bytearray()  # a push's bytes land here
        self._rank: dict[Connection, int] = {}
        self._finished: set[int] = set()
        self._left: set[int] = set()
        self._new: list[Connection] = []
        self._lock = threading.Lock()
        self._wake_r, self._wake_w = os.pipe()
        self.over = False
        for target, name in ((self._accept, "asrdist-outer-accept"),
                             (self._serve, "asrdist-outer")):
            threading.Thread(target=target, name=name, daemon=True).start()

    def note_left(self, left: Mapping[int, int]) -> None:
        """The learners dropped so far (the store process reads them every second)."""
        if self.over:  # no thread reads the wake-up pipe any more
            return
        self._left = set(left)
        os.write(self._wake_w, b"l")

    # -- threads -----------------------------------------------------------------------------

    def _accept(self) -> None:
        """Take connections that answer the key's challenge (and prove the server knows it),
        within ``timeout_s``: one that does not is closed and named, and cannot hold up the
        next (the Listener's own challenge would wait for its answer without a deadline)."""
        while not self.over:
            try:
                conn = self._listener.accept()
            except OSError:
                continue  # the listener closed at the end
            try:
                set_deadline(conn, self.timeout_s)
                deliver_challenge(conn, self.key)
                answer_challenge(conn, self.key)
            except (OSError, EOFError, multiprocessing.AuthenticationError) as exc:
                print(f"asrdist-store: outer state: refused a connection from "
                      f"{self._listener.last_accepted}: {first_line(exc) or type(exc).__name__} "
                      "(no learner of this run: it lacks the run's secret)", file=sys.stderr,
                      flush=True)
                conn.close()
                continue
            with self._lock:
                self._new.append(conn)
            os.write(self._wake_w, b"c")

    def _serve(self) -> None:
        conns: list[Connection] = []
        while not self.over:
            # before the start arrives only greetings and the start are read (a push waits)
            watched = conns if self.state is not None else \
                [c for c in conns if c not in self._rank or c is self._starter]
            for ready in wait([self._wake_r, *watched]):
                if ready == self._wake_r:
                    os.read(self._wake_r, 4096)
                    with self._lock:
                        conns += self._new
                        self._new.clear()
                    continue
                assert isinstance(ready, Connection)
                if not self._handle_safely(ready):
                    if ready is self._starter:
                        self._starter = None
                    conns.remove(ready)
                    ready.close()
            everyone = self._finished | self._left
            if all(r in everyone for r in range(self.world_size)):
                self.over = True
        with suppress(OSError):
            self._listener.close()
        for conn in conns:
            conn.close()

    def _handle_safely(self, conn: Connection) -> bool:
        """Handle one message; False when the connection ends (``done``, or a learner lost
        mid-message: whatever it was sending is not applied)."""
        try:
            return self._handle(conn)
        except EOFError:
            return False
        except Exception as exc:  # one learner's failure must not end the others' server
            rank = self._rank.get(conn, "?")
            print(f"asrdist-store: outer state: learner {rank}'s connection dropped: "
                  f"{first_line(exc)}", file=sys.stderr, flush=True)
            return False

    def _handle(self, conn: Connection) -> bool:
        message = json.loads(conn.recv_bytes(HEADER_MAX))
        kind = message["kind"]
        if kind == "hello":
            rank = int(message["rank"])
            if not 0 <= rank < self.world_size:
                raise ValueError(f"hello from learner {rank}, not one of 0..{self.world_size - 1}")
            self._rank[conn] = rank
            start = self.state is None and self._starter is None
            if start:
                self._starter = conn
            send_message(conn, {"init": start, "token": self.token})
        elif kind == "init":
            start = conn.recv_bytes()
            if self.state is None:
                self._init(torch.load(io.BytesIO(start), weights_only=True))
            send_message(conn, {"token": self.token})
        elif kind == "push":
            return self._push(conn, message)
        elif kind == "save":
            send_message(conn, self._save(self._rank[conn], int(message["step"])))
        elif kind == "load":
            send_message(conn, self._load(str(message["token"])))
        elif kind == "done":
            self._finished.add(self._rank[conn])
            return False
        else:
            raise ValueError(f"unknown message {kind!r}")
        return True

    # -- the state ---------------------------------------------------------------------------

    def _init(self, start: dict[str, Any]) -> None:
        weights = start["weights"]
        if not isinstance(weights, torch.Tensor) or weights.dtype != torch.float32 \
                or weights.dim() != 1 or not bool(torch.isfinite(weights).all()):
            raise ValueError("a start that is not finite flat float32 weights")
        self.state = AsyncOuter(weights, **start["config"])
        name = start["compress"]
        self.codec = make_codec(name, int(start["block"])) if name else None
        numel = weights.numel()
        self._wire = bytearray(self.codec.wire_bytes(numel) if self.codec else 4 * numel)
        self.token = secrets.token_hex(8)

    def _push(self, conn: Connection, header: Mapping[str, Any]) -> bool:
        """Apply a push and answer it; False (and no push applied) for a learner dropped
        already, which the answer tells (a frozen one woken up: a departure is final), or for
        a push that does not fit the state (:meth:`_check`), named in the answer and here."""
        rank = self._rank[conn]
        try:
            got = conn.recv_bytes_into(self._wire)
        except multiprocessing.BufferTooShort as exc:
            got = len(exc.args[0])
        try:
            steps, seconds, grad = self._check(header, got)
        except PushRefused as exc:
            why = f"learner {rank}'s push refused: {exc}"
            print(f"asrdist-store: outer state: {why}", file=sys.stderr, flush=True)
            send_message(conn, {"error": why})
            return False
        if rank in self._left:
            send_message(conn, {"error": f"learner {rank} was dropped from the run (silent past "
                                  "--exchange-timeout): the outer state applies no push of "
                                  "it any more"})
            return False
        weights, next_steps, stale = self.state.push(rank, grad, steps, seconds)
        send_message(conn, {"steps": next_steps, "stale": stale})
        conn.send_bytes(weights.numpy())
        return True

    def _check(self, header: Mapping[str, Any], got: int) -> tuple[int, float, torch.Tensor]:
        """A push's steps, seconds and pseudo-gradient, once they fit the state: the size and
        encoding its header says are the state's, its bytes are that many, and every value
        decoded is finite (a NaN would end the run, a wrong size corrupt it); else
        PushRefused."""
        if self.state is None:
            raise PushRefused("no state yet (a push before the start)")
        numel, encoding = self.state.numel, self.codec.name if self.codec else "float32"
        if header.get("numel") != numel:
            raise PushRefused(f"{header.get('numel')} values, the state has {numel}")
        if header.get("encoding") != encoding:
            raise PushRefused(f"encoding {header.get('encoding')!r}, the state's is {encoding}")
        if got != len(self._wire):
            raise PushRefused(f"{got} bytes, {len(self._wire)} expected")
        steps, seconds = header.get("steps"), header.get("seconds")
        if not isinstance(steps, int) or steps < 0 or not isinstance(seconds, (int, float)) \
                or not math.isfinite(seconds) or seconds < 0:
            raise PushRefused(f"steps {steps!r}, seconds {seconds!r}")
        wire = torch.frombuffer(self._wire, dtype=torch.uint8)
        grad = self.codec.decode(wire, numel) if self.codec else wire.view(torch.float32)
        bad = int((~torch.isfinite(grad)).sum())
        if bad:
            raise PushRefused(f"{bad} of its {numel} values are not finite (NaN or inf)")
        return steps, float(seconds), grad

    def _save(self, rank: int, step: int) -> dict[str, Any]:
        if self.run_dir is None:
            return {"error": f"cannot save the outer state: {NO_RUN_DIR}"}
        path = self.run_dir / STATE_FILE
        saved = {"token": self.token, "step": step, "rank": rank,
                 "state": self.state.state_dict()}
        try:
            write_atomically(path, lambda f: torch.save(saved, f), "diloco-async outer state")
        except AsrdistError as exc:
            return {"error": str(exc)}
        return {"token": self.token}

    def _load(self, token: str) -> dict[str, Any]:
        """The saved state of the run whose token is ``token``, once; later loads check."""
        if self.run_dir is None:
            return {"error": f"cannot resume the outer state: {NO_RUN_DIR}"}
        path = self.run_dir / STATE_FILE
        if self._loaded:
            if token != self.token:
                return {"error": f"{path}: the learners' checkpoints are of different runs "
                                 f"(outer state tokens {self.token} and {token})"}
            return {"token": self.token}
        if not path.is_file():
            return {"error": f"{path}: no diloco-async outer state to resume from (an elastic "
                             "run's store process writes it at every checkpoint)"}
        try:
            saved = torch.load(path, weights_only=True)
        except Exception as exc:  # a damaged file: torch's zip reader, pickle or OS errors
            return {"error": f"{path}: cannot read the diloco-async outer state: "
                             f"{first_line(exc)}"}
        if saved.get("token") != token:
            return {"error": f"{path}: the outer state of another run (token "
                             f"{saved.get('token')}, the checkpoints' {token})"}
        state = saved["state"]
        if state["weights"].numel() != self.state.numel:
            return {"error": f"{path}: an outer state of {state['weights'].numel()} weights, "
                             f"the model has {self.state.numel}"}
        # a resume with more learners: the new ones pulled w_g as it is now
        pulled = list(state["pulled_t"])[: self.world_size]
        state["pulled_t"] = pulled + [int(state["t"])] * (self.world_size - len(pulled))
        self.state.load_state_dict(state)
        self.token, self._loaded = token, True
        return {"token": token}
