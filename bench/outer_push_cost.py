"""What one push to an elastic diloco-async run's outer state costs a learner, over loopback.

The outer state lives in the store process (:mod:`asrdist.parallel.processes.outer_server`); a
learner pushes its pseudo-gradient and gets the global weights back through
:class:`~asrdist.parallel.processes.outer_link.StoreOuterLink`. Timed here, each in a forked process
as the store process is (one torch thread): the bare transfer (``send_bytes`` of the weights
there, ``recv_bytes_into`` back: the calls the link uses) and a whole push (the transfers, the
delayed Nesterov update, the reply). Medians over ``--reps`` after one warm-up.

    .venv/bin/python -m bench.outer_push_cost [--mb 17 68] [--reps 7] [--publish]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
import traceback
from collections.abc import Callable
from multiprocessing.connection import Client, Listener

import torch

from asrdist.parallel.processes.outer_link import StoreOuterLink
from asrdist.parallel.processes.outer_server import OuterServer
from asrdist.parallel.rules.async_outer import AsyncOuter
from bench.results import publish, publish_option


def _forked(serve: Callable[[int], None]) -> tuple[int, bytes]:
    """Fork a process running ``serve(write_fd)`` (one torch thread), which writes
    ``PORT KEYHEX`` there once it listens; its address and key."""
    read_fd, write_fd = os.pipe()
    if os.fork() == 0:
        try:
            os.close(read_fd)
            torch.set_num_threads(1)
            serve(write_fd)
        except BaseException:  # noqa: BLE001 - said on stderr before the exit below
            traceback.print_exc()
        finally:
            os._exit(0)
    os.close(write_fd)
    with os.fdopen(read_fd) as f:
        said = f.read().split()
    if len(said) != 2:  # it failed before listening (its traceback is on stderr)
        raise SystemExit("bench.outer_push_cost: a server process ended before listening")
    return int(said[0]), bytes.fromhex(said[1])


def _echo(numel: int, reps: int) -> Callable[[int], None]:
    """A server that receives ``reps + 1`` float32 vectors of ``numel`` and sends each back."""
    def serve(fd: int) -> None:
        key = os.urandom(16)
        with Listener(("127.0.0.1", 0), authkey=key) as listener:
            os.write(fd, f"{listener.address[1]} {key.hex()}".encode())
            os.close(fd)
            with listener.accept() as conn:
                buf = torch.empty(numel).numpy()
                for _ in range(reps + 1):
                    conn.recv_bytes_into(buf)
                    conn.send_bytes(buf)
    return serve


def _outer(fd: int) -> None:
    """An outer-state server for one learner, until it has finished."""
    server = OuterServer(1, 120.0)
    os.write(fd, f"{server.port} {server.key.hex()}".encode())
    os.close(fd)
    while not server.over:
        time.sleep(0.05)


def _median_s(fn: Callable[[], object], reps: int) -> float:
    fn()  # warm-up
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def measure(numel: int, reps: int) -> tuple[float, float]:
    """Median seconds of a bare transfer each way and of a whole push, for ``numel`` floats."""
    vector = torch.randn(numel)
    port, key = _forked(_echo(numel, reps))
    with Client(("127.0.0.1", port), authkey=key) as conn:
        back = torch.empty(numel).numpy()
        bare = _median_s(lambda: (conn.send_bytes(vector.numpy()),
                                  conn.recv_bytes_into(back)), reps)
    os.wait()
    port, key = _forked(_outer)
    link = StoreOuterLink(rank=0, address=("127.0.0.1", port), key=key,
                          state=AsyncOuter(vector, 1, 10), timeout_s=120.0)
    steps = iter(range(10, 10 * (reps + 2), 10))
    push = _median_s(lambda: link.push_pull(vector * 1e-3, next(steps)), reps)
    link.finish()
    os.wait()
    return bare, push


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=float, nargs="+", default=[17.0, 68.0],
                    help="model sizes, MB of float32 weights")
    ap.add_argument("--reps", type=int, default=7)
    publish_option(ap, __file__)
    args = ap.parse_args()
    rows = []
    for mb in args.mb:
        bare, push = measure(int(mb * 1e6 / 4), args.reps)
        rows.append(f"| {mb:g} | {bare * 1e3:.0f} | {push * 1e3:.0f} | {push / bare:.2f} |")
    lines = [
        "## A push to the elastic outer state (store process), over loopback", "",
        f"Median of {args.reps} after a warm-up; each server a forked process with one torch "
        f"thread, as the store process is; 1-minute load average {os.getloadavg()[0]:.1f} "
        f"({os.cpu_count()} cores).", "",
        f"Command: `.venv/bin/python -m bench.outer_push_cost --mb "
        f"{' '.join(f'{mb:g}' for mb in args.mb)} --reps {args.reps}`", "",
        "| model (MB) | bare transfer each way (ms) | whole push (ms) | push / bare |",
        "|---:|---:|---:|---:|", *rows]
    publish(lines, args.publish)


if __name__ == "__main__":
    main()
