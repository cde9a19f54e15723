"""A process on the run's network without its secret, holding what the store says: what the
outer server must refuse (tests/parallel/test_network.py and bench.probes network)."""

from __future__ import annotations

import json
import multiprocessing
import os
from datetime import timedelta
from multiprocessing.connection import Client
from pathlib import Path

import torch.distributed as dist

from asrdist.parallel.processes import secret, storehost


def approach_outer_server(port: int, elsewhere: str, report: str) -> None:
    """Wait for the outer state's address in the store at 127.0.0.1:``port``, try its key
    (the store's ``outer/key`` if any, else a guess), and if let in ask for a save into
    ``elsewhere``; write what happened to ``report`` (``refused (...)`` or ``connected ...``)."""
    os.environ.pop(secret.SECRET_ENV, None)
    store = dist.PrefixStore(storehost._PREFIX, dist.TCPStore(
        "127.0.0.1", port, None, False, timedelta(seconds=60)))
    store.wait([storehost.OUTER_ADDRESS])
    where = int(store.get(storehost.OUTER_ADDRESS).decode().split("|")[0])
    key = bytes.fromhex(store.get("outer/key").decode()) if store.check(["outer/key"]) \
        else b"guess"
    try:
        conn = Client(("127.0.0.1", where), authkey=key)
        conn.send_bytes(json.dumps({"kind": "hello", "rank": 1}).encode())
        conn.recv_bytes()
        conn.send_bytes(json.dumps({"kind": "save", "step": 1, "dir": elsewhere}).encode())
        outcome = f"connected with the store's key; save answered {conn.recv_bytes()[:80]!r}"
    except (OSError, EOFError, multiprocessing.AuthenticationError) as exc:
        outcome = f"refused ({type(exc).__name__})"
    Path(report).write_text(outcome)
