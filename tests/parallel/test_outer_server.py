"""The elastic run's outer-state server (asrdist.parallel.processes.outer_server), served from this
process over loopback: a push cut short by its learner's death is not applied and the server
goes on, a dropped learner's push is refused; the saved state resumes in a new server only for
its own run. Expected weights by hand from async_diloco's delayed Nesterov rule."""

from __future__ import annotations

import json
import os
import struct
import time
from multiprocessing.connection import Client

import pytest
import torch

from asrdist.errors import AsrdistError
from asrdist.parallel.processes.outer_link import StoreOuterLink
from asrdist.parallel.processes.outer_server import OuterServer
from asrdist.parallel.rules.async_outer import AsyncOuter

START = torch.arange(6, dtype=torch.float32)


def _link(server: OuterServer, rank: int, start: torch.Tensor) -> StoreOuterLink:
    """Learner ``rank`` of 2 (lr 0.5, mu 0.5, N = 2, c = 0) reaching ``server``."""
    return StoreOuterLink(rank=rank, address=("127.0.0.1", server.port), key=server.key,
                          state=AsyncOuter(start, 2, 4, lr=0.5, momentum=0.5), timeout_s=5.0)


def _ends(server: OuterServer) -> None:
    deadline = time.monotonic() + 5.0
    while not server.over:
        assert time.monotonic() < deadline, "the server did not end"
        time.sleep(0.01)


def test_a_push_cut_short_is_not_applied_and_a_resume_takes_its_own_run_s_state(tmp_path):
    server = OuterServer(2, 5.0, run_dir=tmp_path)
    learner0 = _link(server, 0, START)  # the first to say hello: it sends the start
    # learner 1 says hello, then dies 12 bytes into its 24-byte push
    raw = Client(("127.0.0.1", server.port), authkey=server.key)
    raw.send_bytes(json.dumps({"kind": "hello", "rank": 1}).encode())
    assert json.loads(raw.recv_bytes())["init"] is False
    raw.send_bytes(json.dumps({"kind": "push", "steps": 4, "seconds": 1.0, "numel": 6,
                               "encoding": "float32"}).encode())
    os.write(raw.fileno(), struct.pack("!i", 24) + bytes(12))  # multiprocessing's framing
    raw.close()
    # t = 1: d = 2, w = START - 0.5 * (2 / 2); had learner 1's push counted, the staleness
    # would be 1 and w another
    weights, steps, stale = learner0.push_pull(torch.full((6,), 2.0), 4)
    assert torch.equal(weights, START - 0.5) and (steps, stale) == (4, 0)
    learner0.save(4)
    saved = torch.load(tmp_path / "outer_state.pt")
    assert saved["token"] == learner0.token and saved["step"] == 4
    # learner 1 dropped by the others, then woken: its push is refused, not applied
    server.note_left({1: 0})
    woken = Client(("127.0.0.1", server.port), authkey=server.key)
    woken.send_bytes(json.dumps({"kind": "hello", "rank": 1}).encode())
    woken.recv_bytes()
    woken.send_bytes(json.dumps({"kind": "push", "steps": 4, "seconds": 1.0, "numel": 6,
                                 "encoding": "float32"}).encode())
    woken.send_bytes(torch.ones(6).numpy())
    assert "learner 1 was dropped" in json.loads(woken.recv_bytes())["error"]
    learner0.finish()
    _ends(server)
    assert torch.equal(server.state.weights, START - 0.5)

    again = OuterServer(2, 5.0, run_dir=tmp_path)
    resumed = _link(again, 0, torch.zeros(6))  # the start, replaced by the saved state
    with pytest.raises(AsrdistError, match="the outer state of another run"):
        resumed.load("0123456789abcdef")
    resumed.load(saved["token"])
    # t = 2: d = 2 + 0, b = 0.5 * 0 + 2 / 2 = 1, w = (START - 0.5) - 0.5 * (0.5 * 1 + 0 / 2)
    weights, _, _ = resumed.push_pull(torch.zeros(6), 4)
    assert torch.equal(weights, START - 0.75)
    resumed.finish()
    again.note_left({1: 0})
    _ends(again)
