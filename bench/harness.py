"""What the benchmarks share: another revision's asrdist and a fresh process to measure a tree's
code in; two emulated nodes joined by a link (Linux network namespaces and a veth pair; root
only); the strategies the real-process benchmarks run at 4 learners.

The learner processes themselves are :func:`asrdist.testing.learners.launch` (the tests' too);
``bench.transport_cost`` keeps its own, since it measures another checkout that has none.
"""

from __future__ import annotations

import ctypes
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]


def commit_of(ref: str) -> str:
    """The short commit of git revision ``ref`` of this repository."""
    return subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", ref],
                          capture_output=True, text=True, check=True).stdout.strip()


def extract(ref: str, into: Path) -> Path:
    """The ``asrdist`` package of git revision ``ref`` (read from git only: no edits of the
    working tree), unpacked under ``into``; ``into``, a tree to measure."""
    archive = subprocess.run(["git", "-C", str(REPO), "archive", ref, "asrdist"],
                             capture_output=True, check=True).stdout
    into.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")
    return into


def compared_trees(ref: str | None, work: Path) -> dict[str, Path]:
    """The trees a before/after benchmark measures, by name: this one, and with ``ref`` that
    revision's asrdist extracted under ``work`` first (named with its commit where ``ref`` is
    not one already)."""
    trees = {f"this tree ({commit_of('HEAD')})": REPO}
    if ref:
        commit = commit_of(ref)
        work.mkdir(parents=True, exist_ok=True)
        name = ref if commit.startswith(ref) or ref.startswith(commit) else f"{ref} ({commit})"
        trees = {name: extract(ref, Path(tempfile.mkdtemp(dir=work))), **trees}
    return trees


def generated_once(root: Path, make: Callable[[Path], int]) -> int:
    """The frame count of the inputs ``make(root)`` writes (and returns), made only when
    ``root`` lacks its marker: the marker is written last, so a cut generation is redone."""
    marker = root / "frames"
    if not marker.is_file():
        shutil.rmtree(root, ignore_errors=True)
        frames = make(root)
        marker.write_text(f"{frames}\n")
    return int(marker.read_text())


def fresh_process(code: str, *args: object, tree: Path = REPO,
                  env: dict[str, str] | None = None) -> Any:
    """What ``python -c code args...`` prints last, as JSON, run in a fresh process on
    ``tree``'s asrdist (its PYTHONPATH, and its cwd: ``-c`` puts the cwd first on sys.path),
    with ``env`` added; its stderr's tail, as SystemExit, when it fails."""
    proc = subprocess.run([sys.executable, "-c", code, *map(str, args)], cwd=tree,
                          env={**os.environ, "PYTHONPATH": str(tree), **(env or {})},
                          capture_output=True, text=True)
    if proc.returncode:
        raise SystemExit(proc.stderr[-3000:])
    return json.loads(proc.stdout.strip().splitlines()[-1])


def run_training(cmd: list[str], out: Path) -> tuple[subprocess.CompletedProcess, float]:
    """Run a training command (``asrdist-train``, under mpiexec or not) afresh into ``out``:
    one torch thread a learner, this interpreter's console scripts first on PATH; the finished
    process (its stderr kept) and its wall seconds."""
    if out.exists():
        shutil.rmtree(out)
    env = {**os.environ, "OMP_NUM_THREADS": "1",
           "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    t0 = time.monotonic()
    proc = subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                          text=True)
    return proc, time.monotonic() - t0


NS = ("asrdist-fa", "asrdist-fb")  # the two nodes' namespaces
NS_ADDR = ("10.231.7.1", "10.231.7.2")  # node A's address is the rendezvous's
VETH = ("asrdist-va", "asrdist-vb")  # each node's end of the link
CLONE_NEWNET = 0x40000000


def netns_up() -> bool:
    """Two namespaces joined by a veth pair; False (and nothing left) when that fails."""
    cmds = [["ip", "netns", "add", NS[0]], ["ip", "netns", "add", NS[1]],
            ["ip", "link", "add", VETH[0], "netns", NS[0], "type", "veth", "peer",
             "name", VETH[1], "netns", NS[1]]]
    for ns, addr, dev in zip(NS, NS_ADDR, VETH, strict=True):
        cmds += [["ip", "-n", ns, "addr", "add", f"{addr}/24", "dev", dev],
                 ["ip", "-n", ns, "link", "set", dev, "up"],
                 ["ip", "-n", ns, "link", "set", "lo", "up"]]
    for cmd in cmds:
        if subprocess.run(cmd, capture_output=True).returncode != 0:
            netns_down()
            return False
    return True


def netns_down() -> None:
    """Remove both namespaces (and with them the link)."""
    for ns in NS:
        subprocess.run(["ip", "netns", "del", ns], capture_output=True)


def set_link(up: bool) -> None:
    """Cut the link between the nodes (node A's end down), or restore it."""
    subprocess.run(["ip", "-n", NS[0], "link", "set", VETH[0], "up" if up else "down"],
                   check=True)


def limit(rate: str) -> None:
    """Both ends of the link limited to ``rate`` (tc syntax: 1gbit, 250mbit)."""
    for ns, dev in zip(NS, VETH, strict=True):
        subprocess.run(["ip", "netns", "exec", ns, "tc", "qdisc", "replace", "dev", dev, "root",
                        "tbf", "rate", rate, "burst", "512kb", "latency", "100ms"], check=True,
                       capture_output=True)


def enter_node(rank: int) -> None:
    """Move this (single-threaded, just forked) learner into its node's namespace, ranks 0-1
    node A and 2-3 node B; gloo then talks over that node's veth end (the other node) or its
    loopback (the same node). A ``setup`` for :func:`asrdist.testing.learners.launch`."""
    ns = NS[rank // 2]
    fd = os.open(f"/var/run/netns/{ns}", os.O_RDONLY)
    try:
        if ctypes.CDLL(None, use_errno=True).setns(fd, CLONE_NEWNET) != 0:
            raise OSError(ctypes.get_errno(), f"setns {ns}")
    finally:
        os.close(fd)
    os.environ["GLOO_SOCKET_IFNAME"] = VETH[rank // 2]


def presets(learners_per_node: int = 2) -> list[tuple[str, dict[str, Any]]]:
    """The strategies the real-process benchmarks run, with their options: hadpsgd in nodes of
    ``learners_per_node`` consecutive ranks on a random ring, ma averaging every 8 steps."""
    return [
        ("ssgd", {}),
        ("adpsgd-fixed", {}),
        ("adpsgd-random", {}),
        ("adpsgd-delay1", {}),
        ("hadpsgd", {"learners_per_node": learners_per_node, "hadpsgd_variant": "random"}),
        ("ma", {"avg_period": 8}),
    ]
