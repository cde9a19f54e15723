"""A run as a hostile process on its hosts sees it (docs/threat_model.md), on real processes:
no socket listens beyond the address the launcher named; the store holds no key, so a client
with the store's contents cannot reach the outer state; a forged stop or departure in the store
is refused, named in the log, and the run finishes; a bad push is refused naming it; a save
takes no path from the network; the run secret's file is made once, mode 0600."""

from __future__ import annotations

import json
import multiprocessing
import os
import socket
import stat
import time
from datetime import timedelta
from multiprocessing.connection import Client
from pathlib import Path

import pytest
import torch
import torch.distributed as dist

from asrdist.errors import AsrdistError
from asrdist.parallel.launch.rendezvous import free_port
from asrdist.parallel.processes import bind, membership, preempt, secret, storehost
from asrdist.parallel.processes.outer_link import StoreOuterLink
from asrdist.parallel.processes.outer_server import STATE_FILE, OuterServer
from asrdist.parallel.rules.async_outer import AsyncOuter
from asrdist.testing.stranger import approach_outer_server
from tests.parallel.cli_learners import TINY_MODEL, join_learners, start_learners, when_training
from tests.parallel.conftest import ok, run_learners

NAMED = {"127.0.0.1", "::1"}  # what the tests' launcher names: loopback
DEFAULT_GROUP = "0/"  # torch's default group's prefix in the store
TINY = [*TINY_MODEL, "--log-every=1", "--epochs=50", "--max-steps=16",
        "--checkpoint-every=100", "--exchange-timeout=20", "--distance-every=0"]


def _client(port: int) -> dist.TCPStore:
    """An unauthenticated client of a run's store, as any process on the host can make."""
    return dist.TCPStore("127.0.0.1", port, None, False, timedelta(seconds=30))


@pytest.mark.parametrize("options", [{}, {"elastic": True}], ids=["fail-stop", "elastic"])
def test_no_socket_of_a_two_learner_run_listens_beyond_the_named_address(tmp_path, options):
    """Each learner (and, elastic, the store process with its outer-state server) lists its
    listening sockets mid-run: every one is on 127.0.0.1, none on 0.0.0.0 or ::."""
    sc = {"algo": "diloco-async", "lr": 0.1, "steps": 4, "listening_at": 2,
          "options": {"avg_period": 2, **options}}
    ok(run_learners(sc, 2, tmp_path))
    seen = {}
    for rank in range(2):
        seen.update(json.loads((tmp_path / f"listening{rank}.json").read_text()))
    assert len(seen) == (3 if options else 2), seen  # elastic: the store process too
    sockets = [tuple(s) for listed in seen.values() for s in listed]
    assert sockets, seen  # learner 0 (or the store process) holds the store's at least
    assert {addr for addr, _ in sockets} <= NAMED, seen


def test_a_client_with_the_store_s_contents_but_not_the_secret_cannot_reach_the_outer_state(
        tmp_path):
    """An elastic diloco-async run with a stranger on its store: the store names the outer
    state's port but holds no key; the stranger's connection is refused (and named in the
    store process's log), nothing is written where it asked, and the run finishes."""
    port, elsewhere, report = free_port(), tmp_path / "elsewhere", tmp_path / "attack.txt"
    attacker = multiprocessing.get_context("fork").Process(
        target=approach_outer_server, args=(port, str(elsewhere), str(report)))
    attacker.start()
    sc = {"algo": "diloco-async", "lr": 0.1, "steps": 6, "compute_s": 0.3,
          "options": {"avg_period": 2, "elastic": True}}
    ok(run_learners(sc, 2, tmp_path / "run", port=port))
    attacker.join(30)
    assert report.read_text().startswith("refused"), report.read_text()
    assert not (elsewhere / STATE_FILE).exists()


def test_a_forged_stop_is_refused_and_the_run_finishes(corpus, tmp_path):
    """One ``TCPStore.set`` of the stop key by a process without the run secret, mid-run of
    asrdist-train ssgd: both learners name it in their log as refused and finish (exit 0),
    rather than stopping (75)."""
    port, out = free_port(), tmp_path / "run"
    procs = start_learners(corpus, out, "ssgd", *TINY, port=port)
    when_training(out, procs, 2)
    raw = _client(port)
    for default in (raw, dist.PrefixStore("default_pg", raw)):  # store passed, or tcp://
        dist.PrefixStore(preempt.STOP_PREFIX, dist.PrefixStore(DEFAULT_GROUP, default)).set(
            "any", "SIGTERM")
    codes = join_learners(procs, out)
    errs = [(out / f"err{r}.txt").read_text() for r in range(2)]
    assert codes == [0, 0], errs
    for err in errs:
        assert f"refused {preempt.STOP_PREFIX}any = 'SIGTERM'" in err, err[-1500:]
    assert (out / "final.pt").exists()


def test_a_forged_departure_is_refused_and_the_learner_stays(tmp_path):
    """Elastic adpsgd: a stranger records learner 1 as left in the store; the survivors do
    not drop it, it is not told it was dropped, and both finish with the same average."""
    port = free_port()
    stranger = multiprocessing.get_context("fork").Process(target=_forge_departure,
                                                           args=(port,))
    stranger.start()
    sc = {"algo": "adpsgd-random", "lr": 0.05, "steps": 30, "compute_s": 0.05,
          "options": {"elastic": True}}
    run = run_learners(sc, 2, tmp_path, port=port)
    stranger.join(30)
    res = ok(run)
    assert torch.equal(res[0]["final"], res[1]["final"])
    assert all("dropped" not in err for err in run.stderr), run.stderr
    assert any(f"refused {membership._PREFIX}left/1" in err for err in run.stderr), run.stderr


def _forge_departure(port: int) -> None:
    os.environ.pop(secret.SECRET_ENV, None)
    dist.PrefixStore(storehost._PREFIX, _client(port)).wait(["lease"])  # learners on it
    time.sleep(1.0)
    left = dist.PrefixStore(membership._PREFIX, _client(port))
    left.set("left/1", "0")
    left.add("count", 1)


def _server(tmp_path: Path) -> tuple[OuterServer, StoreOuterLink]:
    server = OuterServer(2, 5.0, run_dir=tmp_path / "run")
    link = StoreOuterLink(rank=0, address=("127.0.0.1", server.port), key=server.key,
                          state=AsyncOuter(torch.zeros(6), 2, 4, lr=0.5, momentum=0.5),
                          timeout_s=5.0)
    return server, link


def _raw_push(server: OuterServer, header: dict, body: bytes) -> dict:
    """Learner 1's push of ``body`` under ``header``, sent by hand; the server's answer."""
    conn = Client(("127.0.0.1", server.port), authkey=server.key)
    conn.send_bytes(json.dumps({"kind": "hello", "rank": 1}).encode())
    conn.recv_bytes()
    conn.send_bytes(json.dumps({"kind": "push", "steps": 4, "seconds": 1.0, **header}).encode())
    conn.send_bytes(body)
    return json.loads(conn.recv_bytes())


@pytest.mark.parametrize(("header", "body", "why"), [
    ({"numel": 6, "encoding": "float32"}, torch.full((6,), float("nan")).numpy().tobytes(),
     "6 of its 6 values are not finite (NaN or inf)"),
    ({"numel": 5, "encoding": "float32"}, torch.ones(5).numpy().tobytes(),
     "5 values, the state has 6"),
    ({"numel": 6, "encoding": "float32"}, torch.ones(7).numpy().tobytes(),
     "28 bytes, 24 expected"),
    ({"numel": 6, "encoding": "float64"}, torch.ones(3).numpy().tobytes(),
     "encoding 'float64', the state's is float32"),
], ids=["nan", "shape", "size", "dtype"])
def test_a_bad_push_is_refused_naming_it_and_the_state_is_untouched(tmp_path, header, body,
                                                                    why):
    server, link = _server(tmp_path)
    answer = _raw_push(server, header, body)
    assert answer["error"] == f"learner 1's push refused: {why}"
    assert torch.equal(server.state.weights, torch.zeros(6))
    weights, _, _ = link.push_pull(torch.ones(6), 4)  # the server goes on for the others
    assert bool(torch.isfinite(weights).all())
    link.finish()


def test_a_save_message_takes_no_path(tmp_path):
    """A save naming a directory writes the state where the run dir says, not there."""
    server, link = _server(tmp_path)
    conn = Client(("127.0.0.1", server.port), authkey=server.key)
    conn.send_bytes(json.dumps({"kind": "hello", "rank": 1}).encode())
    conn.recv_bytes()
    conn.send_bytes(json.dumps({"kind": "save", "step": 3,
                                "dir": str(tmp_path / "elsewhere")}).encode())
    assert json.loads(conn.recv_bytes()) == {"token": link.token}
    assert not (tmp_path / "elsewhere").exists()
    assert torch.load(tmp_path / "run" / STATE_FILE, weights_only=True)["step"] == 3
    link.finish()


def _establish(run_dir: str, found: multiprocessing.SimpleQueue) -> None:
    found.put(secret.establish(run_dir))


def test_the_run_secret_is_one_file_of_mode_0600_every_learner_reads(tmp_path, monkeypatch):
    """Without ASRDIST_RUN_SECRET, learners starting together all get the same secret from
    RUN_DIR/.run_secret (mode 0600); a file others may read is refused in one line; the
    launcher's variable wins."""
    monkeypatch.delenv(secret.SECRET_ENV)
    ctx = multiprocessing.get_context("fork")
    found = ctx.SimpleQueue()
    procs = [ctx.Process(target=_establish, args=(str(tmp_path), found)) for _ in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(30)
    values = {found.get() for _ in procs}
    path = tmp_path / secret.SECRET_FILE
    assert values == {path.read_bytes().strip()} and len(path.read_bytes()) == 64
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert sorted(p.name for p in tmp_path.iterdir()) == [secret.SECRET_FILE]  # no temp left
    path.chmod(0o640)
    with pytest.raises(AsrdistError, match=r"\.run_secret: refused as the run secret: .*0600"):
        secret.establish(tmp_path)
    monkeypatch.setenv(secret.SECRET_ENV, "x" * 32)
    assert secret.establish(tmp_path) == b"x" * 32


def test_a_learner_with_another_run_secret_is_refused_in_one_line(tmp_path):
    """A multi-host run whose hosts each made their own secret (a run dir not shared): the
    learner whose secret is not learner 0's ends at the rendezvous, saying so, and the run
    with it, rather than every signed message being refused later."""
    run = run_learners({"algo": "ssgd", "lr": 0.1, "steps": 4,
                        "secrets": ["a" * 32, "b" * 32]}, 2, tmp_path)
    assert run.codes[1] != 0 and run.codes[0] != 0
    assert "learner 1: its run secret is not learner 0's" in run.stderr[1], run.stderr[1]


def test_the_bind_address_is_the_named_one_never_all_interfaces(monkeypatch):
    assert bind.bind_address("127.0.0.1") == "127.0.0.1"
    assert bind.bind_address("localhost") in NAMED
    assert bind.bind_address("10.1.2.3", "127.0.0.1") == "127.0.0.1"  # --bind wins
    # a host name that resolves to loopback here (Debian's 127.0.1.1) but names this host to
    # the others: refused, unless every learner is on this host
    monkeypatch.setattr(bind.socket, "getaddrinfo", lambda *a, **k: [
        (socket.AF_INET, socket.SOCK_STREAM, 6, "", ("127.0.1.1", 0))])
    with pytest.raises(AsrdistError, match=r"MASTER_ADDR gpu012 resolves to 127\.0\.1\.1 "
                                           r"\(loopback\).*give --bind"):
        bind.bind_address("gpu012")
    assert bind.bind_address("gpu012", all_here=True) == "127.0.1.1"
    monkeypatch.setattr(bind.socket, "getaddrinfo", lambda *a, **k: [
        (socket.AF_INET6, socket.SOCK_STREAM, 6, "", ("fd00::2", 0, 0, 0)),
        (socket.AF_INET, socket.SOCK_STREAM, 6, "", ("192.0.2.2", 0))])
    assert bind.bind_address("gpu012") == "192.0.2.2"  # IPv4 first, as the clients connect


def test_a_loopback_run_keeps_gloo_and_nccl_on_the_loopback_interface():
    env: dict[str, str] = {}
    bind.pin_collectives("127.0.0.1", env)
    assert env == {"GLOO_SOCKET_IFNAME": "lo", "NCCL_SOCKET_IFNAME": "lo"}
    env = {"GLOO_SOCKET_IFNAME": "eth1"}  # the user's choice stays
    bind.pin_collectives("localhost", env)
    assert env["GLOO_SOCKET_IFNAME"] == "eth1"
    env = {}
    bind.pin_collectives("192.0.2.2", env)  # several hosts: their own interfaces
    assert env == {}
