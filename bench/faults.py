"""Fault injection with real asrdist-train processes: every fault ends the job quickly, named,
and ``--resume`` continues it losing at most one checkpoint interval.

Two learners (torchrun's environment, gloo on CPU) train a small BLSTM; once they are training,
one fault is injected; the bench waits until every learner has exited (a hang would show as a
timeout), then runs ``--resume`` to the end. Per scenario: seconds from the fault until the last
learner exited, the steps of work lost (the furthest step a learner had logged before the fault
minus the step it resumed from), and the outcome. SIGKILL "during exchange" stops the learner
first (its partner then waits in the exchange) and kills it there; "during a checkpoint write"
kills the learner the moment its temporary checkpoint file appears. The disk-full scenario runs
in a small tmpfs, the cut link between two network namespaces (root only).

    .venv/bin/python -m bench.faults --publish
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from asrdist.parallel.launch.rendezvous import free_port
from asrdist.testing import cut_unsampled_utterance, make_corpus
from asrdist.train.checkpoint import checkpoint_dir
from asrdist.train.metrics import metrics_path, read_metrics
from bench.harness import NS, NS_ADDR, VETH, netns_down, netns_up, set_link
from bench.results import publish, publish_option

INTERVAL = 20  # --checkpoint-every
STEPS = 200
ARGS = ["--layers=1", "--units=64", "--chunk-len=10", "--batch-size=4", "--shuffle-buffer=16",
        "--heldout-utts=2", "--lr-ref-batch=8", "--log-every=1", "--epochs=100",
        f"--max-steps={STEPS}", f"--checkpoint-every={INTERVAL}", "--exchange-timeout=10",
        "--distance-every=0"]


@dataclass
class Outcome:
    scenario: str
    detect_s: float | None  # None: still running at the limit (a hang)
    lost: int | None  # steps of work lost; None when not resumed
    result: str


class Job:
    """Two learners of one run, started as separate processes."""

    def __init__(self, data: Path, targets: Path, out: Path, algo: str, *extra: str,
                 netns: bool = False) -> None:
        self.out, self.procs = out, []
        port = free_port()
        out.mkdir(parents=True, exist_ok=True)
        for rank in range(2):
            env = {**os.environ, "RANK": str(rank), "WORLD_SIZE": "2", "LOCAL_RANK": str(rank),
                   "MASTER_ADDR": NS_ADDR[0] if netns else "127.0.0.1",
                   "MASTER_PORT": str(port), "OMP_NUM_THREADS": "1"}
            cmd = [sys.executable, "-m", "asrdist.cli.train", "--data", str(data),
                   "--targets", str(targets), "--out", str(out), "--algo", algo, *ARGS, *extra]
            if netns:  # gloo would take the hostname's address: each namespace's own loopback
                cmd = ["ip", "netns", "exec", NS[rank], *cmd]
                env["GLOO_SOCKET_IFNAME"] = VETH[rank]
            with open(out / f"err{rank}.{time.monotonic_ns()}.txt", "w") as err:
                self.procs.append(subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL,
                                                   stderr=err))

    def steps(self, rank: int) -> int:
        path = metrics_path(self.out, rank)
        if not path.is_file():
            return 0
        with contextlib.suppress(ValueError):  # a record half-written as we read
            records = [r for r in read_metrics(path) if r["kind"] == "train"]
            return records[-1]["step"] if records else 0
        return 0

    def wait_training(self, step: int = 30, limit: float = 120) -> None:
        deadline = time.monotonic() + limit
        while min(self.steps(0), self.steps(1)) < step:
            if time.monotonic() > deadline or any(p.poll() is not None for p in self.procs):
                raise RuntimeError(f"{self.out}: learners did not start training")
            time.sleep(0.05)

    def wait_exit(self, limit: float = 90) -> tuple[float | None, list[int | None]]:
        t0 = time.monotonic()
        while time.monotonic() - t0 < limit and any(p.poll() is None for p in self.procs):
            time.sleep(0.05)
        done = all(p.poll() is not None for p in self.procs)
        for p in self.procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        return (time.monotonic() - t0 if done else None), [p.returncode for p in self.procs]

    def stderr(self) -> str:
        return "".join(p.read_text(errors="replace") for p in sorted(self.out.glob("err*.txt")))


def _starts(out: Path, rank: int) -> list[int]:
    return [r["step"] for r in read_metrics(metrics_path(out, rank)) if r["kind"] == "start"]


def _resume(data: Path, targets: Path, out: Path, algo: str, before: list[int],
            name: str, detect: float | None, codes: list, extra: tuple[str, ...] = ()) -> Outcome:
    job = Job(data, targets, out, algo, "--resume", *extra)
    _, resumed = job.wait_exit(limit=300)
    if resumed != [0, 0] or not (out / "final.pt").is_file():
        return Outcome(name, detect, None, f"resume failed {resumed}: "
                       + job.stderr().strip().splitlines()[-1][:100])
    lost = max(b - _starts(out, r)[-1] for r, b in enumerate(before))
    return Outcome(name, detect, lost, f"exits {codes}; resumed at "
                   f"{[_starts(out, r)[-1] for r in range(2)]}, finished step {STEPS}")


def scenario(data: Path, targets: Path, root: Path, name: str, algo: str,
             inject: Callable[[Job], None], extra: tuple[str, ...] = (),
             before_resume: Callable[[Path], None] | None = None, netns: bool = False,
             out: Path | None = None) -> Outcome:
    out = out or root / name.replace(" ", "_").replace("/", "-")
    job = Job(data, targets, out, algo, *extra, netns=netns)
    job.wait_training()
    before = [job.steps(0), job.steps(1)]
    t0 = time.monotonic()
    inject(job)
    done, codes = job.wait_exit()
    detect = None if done is None else time.monotonic() - t0  # from the fault's start
    before = [max(b, job.steps(r)) for r, b in enumerate(before)]
    if detect is None:
        return Outcome(name, None, None, "HANG: learners still running after 90 s")
    if before_resume is not None:
        before_resume(out)
    return _resume(data, targets, out, algo, before, name, detect, codes, extra)


def kill(rank: int, sig: signal.Signals) -> Callable[[Job], None]:
    return lambda job: job.procs[rank].send_signal(sig)


def kill_in_exchange(job: Job) -> None:
    job.procs[1].send_signal(signal.SIGSTOP)
    time.sleep(1.0)  # learner 0 now waits in the exchange/allreduce with learner 1
    job.procs[1].send_signal(signal.SIGKILL)


def kill_in_checkpoint_write(job: Job) -> None:
    directory = checkpoint_dir(job.out, 1)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if directory.is_dir() and any(e.name.endswith(".tmp") for e in os.scandir(directory)):
            job.procs[1].send_signal(signal.SIGKILL)
            return
    job.procs[1].send_signal(signal.SIGKILL)  # not caught mid-write: killed anyway


def stop_and_abandon(job: Job) -> None:
    """SIGSTOP learner 1 and leave it stopped: the other must end the job; then the scheduler
    kills the stopped one (as Slurm would at the end of the job)."""
    job.procs[1].send_signal(signal.SIGSTOP)
    t0 = time.monotonic()
    while job.procs[0].poll() is None and time.monotonic() - t0 < 60:
        time.sleep(0.05)
    job.procs[1].send_signal(signal.SIGKILL)


def corrupt_newest(out: Path) -> None:
    for rank in range(2):
        files = sorted(checkpoint_dir(out, rank).glob("step*.pt"))
        files[-1].write_bytes(files[-1].read_bytes()[:4096])


def cut_link(job: Job) -> None:
    set_link(False)


def disk_full(data: Path, targets: Path, root: Path) -> Outcome:
    """The run dir on a 16 MiB tmpfs, nearly filled once training runs: a checkpoint write
    fails; space is freed and the run resumed."""
    name = "disk full at a checkpoint"
    mount = root / "small"
    mount.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", str(mount)],
                      capture_output=True).returncode != 0:
        return Outcome(name, None, None, "skipped: cannot mount a tmpfs (needs root)")
    try:
        out = mount / "run"

        def fill(job: Job) -> None:
            free = shutil.disk_usage(mount).free
            (mount / "filler").write_bytes(b"\0" * max(0, free - 8192))

        def free_space(_: Path) -> None:
            (mount / "filler").unlink()

        outcome = scenario(data, targets, root, name, "ssgd", fill,
                           before_resume=free_space, out=out)
        said = "No space left on device" in Job.stderr(type("J", (), {"out": out})())
        outcome.result += "; said 'No space left on device'" if said else "; NOT said"
        return outcome
    finally:
        subprocess.run(["umount", "-l", str(mount)], capture_output=True)


def _tail(text: str, *needles: str) -> str:
    """The first line of ``text`` holding every needle, shortened for the table."""
    for line in text.splitlines():
        if all(n in line for n in needles):
            return line.strip()[:140].replace("|", "/")
    return "(no such line)"


def second_run(data: Path, targets: Path, root: Path) -> Outcome:
    """A double submit: a second job with --resume (as local/slurm/train.sbatch always passes)
    on the --out of a run in progress; Detect = until the second job had exited."""
    name = "second job (--resume) on the --out of a running job (ssgd)"
    out = root / "double"
    long = ("--max-steps=100000",)  # neither job may end on its own meanwhile
    first = Job(data, targets, out, "ssgd", *long)
    first.wait_training()
    t0 = time.monotonic()
    second = Job(data, targets, out, "ssgd", "--resume", *long)
    done, codes = second.wait_exit()
    detect = None if done is None else time.monotonic() - t0
    said = "is in use by another run" in second.stderr()
    untouched = all(p.poll() is None for p in first.procs)
    before = [first.steps(0), first.steps(1)]
    for p in first.procs:
        p.send_signal(signal.SIGTERM)
    _, stopped = first.wait_exit()
    before = [max(b, first.steps(r)) for r, b in enumerate(before)]
    outcome = _resume(data, targets, out, "ssgd", before, name, detect, stopped)
    outcome.result = (f"second job exits {codes}, "
                      f"{'refused naming the holder' if said else 'NOT refused'}; first job "
                      f"{'went on' if untouched else 'DISTURBED'}, then SIGTERM: "
                      + outcome.result.replace(f"finished step {STEPS}",
                                               "final.pt written (past --max-steps already)"))
    return outcome


def changed_resume(data: Path, targets: Path, root: Path) -> Outcome:
    """--resume with another --batch-size after a stop: refused naming both values; the run
    then resumed as it was. Detect = until the refused learners had exited."""
    name = "--resume with another --batch-size (ssgd)"
    out = root / "changed"
    job = Job(data, targets, out, "ssgd")
    job.wait_training()
    for p in job.procs:
        p.send_signal(signal.SIGTERM)
    _, stopped = job.wait_exit()
    before = [job.steps(0), job.steps(1)]
    t0 = time.monotonic()
    wrong = Job(data, targets, out, "ssgd", "--resume", "--batch-size=8")
    done, codes = wrong.wait_exit()
    detect = None if done is None else time.monotonic() - t0
    said = "--batch-size 8 (the run's: 4)" in wrong.stderr()
    outcome = _resume(data, targets, out, "ssgd", before, name, detect, stopped)
    outcome.result = (f"after a SIGTERM stop, refused with exits {codes}, "
                      f"{'naming both values' if said else 'NOT said'}; the same run: "
                      + outcome.result)
    return outcome


def bad_utterance(root: Path, timeout: int) -> Outcome:
    """An ark cut mid-matrix in an utterance outside the 64 read before training. Detect =
    from the failing learner's exit until the other's."""
    name = f"ark cut mid-matrix, unsampled utterance (ssgd, --exchange-timeout {timeout})"
    data, targets = make_corpus(root / f"bad{timeout}", num_utts=80)
    utt = cut_unsampled_utterance(data)
    out = root / f"bad{timeout}-run"
    job = Job(data, targets, out, "ssgd", "--max-steps=100000", "--heldout-utts=0",
              f"--exchange-timeout={timeout}", "--distance-every=30")
    deadline = time.monotonic() + 180
    while all(p.poll() is None for p in job.procs) and time.monotonic() < deadline:
        time.sleep(0.02)
    first = time.monotonic()
    done, codes = job.wait_exit()
    detect = None if done is None else time.monotonic() - first
    text = job.stderr()
    named = f"utterance {utt}: cannot read features" in text
    cited = any("[first report: learner" in line and f"utterance {utt}" in line
                for line in text.splitlines())
    return Outcome(name, detect, None, f"exits {codes}; failing learner "
                   f"{'named the utterance' if named else 'did NOT name it'}, the other "
                   f"{'cited it' if cited else 'did NOT cite it'}")


def early_stop(data: Path, targets: Path, root: Path) -> Outcome:
    """SIGTERM to both learners 0.5 s after they start (before any handler of torch's
    import is done)."""
    name = "SIGTERM 0.5 s after start (ssgd)"
    out = root / "early"
    job = Job(data, targets, out, "ssgd")
    time.sleep(0.5)
    t0 = time.monotonic()
    for p in job.procs:
        p.send_signal(signal.SIGTERM)
    done, codes = job.wait_exit()
    detect = None if done is None else time.monotonic() - t0
    return _resume(data, targets, out, "ssgd", [job.steps(0), job.steps(1)], name, detect,
                   codes)


def _torchrun(data: Path, targets: Path, out: Path, *extra: str) -> subprocess.Popen:
    out.mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RANK", "MASTER_"))}
    with open(out / f"err-torchrun.{time.monotonic_ns()}.txt", "w") as err:
        return subprocess.Popen(
            [sys.executable, "-m", "asrdist.cli.torchrun", "--nproc-per-node=2",
             f"--master-port={free_port()}", "-m", "asrdist.cli.train", "--data", str(data),
             "--targets", str(targets), "--out", str(out), "--algo", "ssgd", *ARGS, *extra],
            env={**env, "OMP_NUM_THREADS": "1"}, stdout=subprocess.DEVNULL, stderr=err)


def under_torchrun(data: Path, targets: Path, root: Path, target: str) -> Outcome:
    """asrdist-torchrun: SIGKILL learner 1, or SIGTERM to asrdist-torchrun itself; Detect =
    until asrdist-torchrun exited; resumed with asrdist-torchrun --resume."""
    name = {"kill": "SIGKILL learner 1 under asrdist-torchrun (ssgd)",
            "term": "SIGTERM to asrdist-torchrun (ssgd)"}[target]
    out = root / f"torchrun-{target}"
    proc = _torchrun(data, targets, out)
    job = Job.__new__(Job)
    job.out, job.procs = out, [proc]
    deadline = time.monotonic() + 120
    pids: dict[int, int] = {}
    while min(job.steps(0), job.steps(1)) < 30 and time.monotonic() < deadline:
        pids = {int(r): int(p) for r, p in re.findall(
            r"learner (\d)/2 \(local \d, node \S+, pid (\d+)\)", job.stderr())}
        time.sleep(0.05)
    before = [job.steps(0), job.steps(1)]
    t0 = time.monotonic()
    if target == "kill":
        os.kill(pids[1], signal.SIGKILL)
    else:
        proc.send_signal(signal.SIGTERM)
    done, codes = job.wait_exit()
    detect = None if done is None else time.monotonic() - t0
    text = job.stderr()
    said = _tail(text, "asrdist-torchrun:")
    before = [max(b, job.steps(r)) for r, b in enumerate(before)]
    resumed = _torchrun(data, targets, out, "--resume")
    code = resumed.wait(timeout=300)
    if code != 0:
        return Outcome(name, detect, None, f"status {codes[0]} ({said}); resume failed {code}")
    lost = max(b - _starts(out, r)[-1] for r, b in enumerate(before))
    named = target != "kill" or re.search(r"asrdist: learner 0: .*\blearner 1\b", text)
    return Outcome(name, detect, lost, f"status {codes[0]} ('{said}')"
                   f"{'' if named else '; learner 1 NOT named'}; resumed at "
                   f"{[_starts(out, r)[-1] for r in range(2)]}, finished step {STEPS}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    publish_option(ap, __file__)
    ap.add_argument("--only", help="run only scenarios whose name contains this")
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="asrdist-faults-"))
    data, targets = make_corpus(root / "corpus", num_utts=24)
    d = (data, targets, root)
    runs: list[tuple[str, Callable[[], Outcome]]] = [
        ("SIGKILL learner 1 during compute (adpsgd-random)",
         lambda: scenario(*d, "SIGKILL learner 1 during compute (adpsgd-random)",
                          "adpsgd-random", kill(1, signal.SIGKILL))),
        ("SIGKILL learner 1 during exchange (adpsgd-random)",
         lambda: scenario(*d, "SIGKILL learner 1 during exchange (adpsgd-random)",
                          "adpsgd-random", kill_in_exchange)),
        ("SIGKILL learner 1 during allreduce (ssgd)",
         lambda: scenario(*d, "SIGKILL learner 1 during allreduce (ssgd)", "ssgd",
                          kill_in_exchange)),
        ("SIGKILL learner 1 during checkpoint write (ssgd)",
         lambda: scenario(*d, "SIGKILL learner 1 during checkpoint write (ssgd)", "ssgd",
                          kill_in_checkpoint_write, extra=("--units=256", "--layers=2"))),
        ("SIGKILL learner 0, the store's host (ssgd)",
         lambda: scenario(*d, "SIGKILL learner 0, the store's host (ssgd)", "ssgd",
                          kill(0, signal.SIGKILL))),
        ("SIGTERM to learner 1 only (ssgd)",
         lambda: scenario(*d, "SIGTERM to learner 1 only (ssgd)", "ssgd",
                          kill(1, signal.SIGTERM))),
        ("SIGTERM to all (adpsgd-random)",
         lambda: scenario(*d, "SIGTERM to all (adpsgd-random)", "adpsgd-random",
                          lambda job: [p.send_signal(signal.SIGTERM) for p in job.procs])),
        ("SIGUSR1 to all (ma)",
         lambda: scenario(*d, "SIGUSR1 to all (ma)", "ma",
                          lambda job: [p.send_signal(signal.SIGUSR1) for p in job.procs],
                          extra=("--avg-period=4",))),
        ("SIGSTOP learner 1, never continued (adpsgd-random)",
         lambda: scenario(*d, "SIGSTOP learner 1, never continued (adpsgd-random)",
                          "adpsgd-random", stop_and_abandon)),
        ("corrupt newest checkpoints after SIGTERM (ssgd)",
         lambda: scenario(*d, "corrupt newest checkpoints after SIGTERM (ssgd)", "ssgd",
                          lambda job: [p.send_signal(signal.SIGTERM) for p in job.procs],
                          before_resume=corrupt_newest)),
        ("disk full at a checkpoint", lambda: disk_full(*d)),
        ("link cut between two netns nodes (adpsgd-random)", lambda: _cut_link(*d)),
        ("SIGINT (Ctrl-C) to all (ssgd)",
         lambda: scenario(*d, "SIGINT (Ctrl-C) to all (ssgd)", "ssgd",
                          lambda job: [p.send_signal(signal.SIGINT) for p in job.procs])),
        ("SIGTERM 0.5 s after start (ssgd)", lambda: early_stop(*d)),
        ("second job (--resume) on the --out of a running job (ssgd)",
         lambda: second_run(*d)),
        ("--resume with another --batch-size (ssgd)", lambda: changed_resume(*d)),
        ("ark cut mid-matrix, unsampled utterance (ssgd, --exchange-timeout 10)",
         lambda: bad_utterance(root, 10)),
        ("ark cut mid-matrix, unsampled utterance (ssgd, --exchange-timeout 120)",
         lambda: bad_utterance(root, 120)),
        ("SIGKILL learner 1 under asrdist-torchrun (ssgd)",
         lambda: under_torchrun(*d, "kill")),
        ("SIGTERM to asrdist-torchrun (ssgd)", lambda: under_torchrun(*d, "term")),
    ]
    outcomes = []
    for name, run in runs:
        if args.only and args.only not in name:
            continue
        print(f"-- {name}", file=sys.stderr, flush=True)
        outcomes.append(run())
        print(f"   {outcomes[-1]}", file=sys.stderr, flush=True)
    shutil.rmtree(root, ignore_errors=True)
    lines = [
        "## Fault injection",
        "",
        f"2 learners (CPU, gloo), a 1-layer BLSTM, {STEPS} steps, a checkpoint every "
        f"{INTERVAL} steps, `--exchange-timeout 10`. Detect = seconds from the fault until "
        "every learner had exited (a hang: over 90 s). Lost = the furthest step logged before "
        "the fault minus the step `--resume` continued from (at most one interval expected; "
        "the corrupt-checkpoint row falls back one checkpoint on purpose).",
        "",
        "Command: `.venv/bin/python -m bench.faults --publish` (`make faults`; "
        "root for the tmpfs and network-namespace rows). The rows after the cut link are a "
        "user's mistakes and launchers: for the refused second job and --resume, Detect is "
        "until the refused learners exited; for the bad utterance, from the failing learner's "
        "exit until the other's.",
        "",
        "| scenario | detect (s) | lost (steps) | outcome |",
        "|---|---|---|---|",
    ]
    for o in outcomes:
        detect = "HANG" if o.detect_s is None else f"{o.detect_s:.1f}"
        lost = "-" if o.lost is None else str(o.lost)
        lines.append(f"| {o.scenario} | {detect} | {lost} | {o.result} |")
    hangs = sum(o.detect_s is None for o in outcomes)
    over = sum(o.lost is not None and o.lost > INTERVAL for o in outcomes)
    scratch = sum("resumed at [0, 0]" in o.result for o in outcomes)
    lines += ["", f"Hangs: {hangs}; losing more than one interval: {over}; restarted from "
                  f"scratch: {scratch}."]
    publish(lines, args.publish if not args.only else None)


def _cut_link(data: Path, targets: Path, root: Path) -> Outcome:
    name = "link cut between two netns nodes (adpsgd-random)"
    if os.geteuid() != 0 or not netns_up():
        return Outcome(name, None, None, "skipped: network namespaces need root")
    try:
        out = root / "netns"
        job = Job(data, targets, out, "adpsgd-random", netns=True)
        job.wait_training()
        before = [job.steps(0), job.steps(1)]
        t0 = time.monotonic()
        cut_link(job)
        done, codes = job.wait_exit()
        detect = None if done is None else time.monotonic() - t0
        before = [max(b, job.steps(r)) for r, b in enumerate(before)]
        if detect is None:
            return Outcome(name, None, None, "HANG: learners still running after 90 s")
        set_link(True)
        return _resume_netns(data, targets, out, before, name, detect, codes)
    finally:
        netns_down()


def _resume_netns(data: Path, targets: Path, out: Path, before: list[int], name: str,
                  detect: float, codes: list) -> Outcome:
    job = Job(data, targets, out, "adpsgd-random", "--resume", netns=True)
    _, resumed = job.wait_exit(limit=300)
    if resumed != [0, 0]:
        return Outcome(name, detect, None, f"resume failed {resumed}")
    lost = max(b - _starts(out, r)[-1] for r, b in enumerate(before))
    return Outcome(name, detect, lost, f"exits {codes}; resumed at "
                   f"{[_starts(out, r)[-1] for r in range(2)]}, finished step {STEPS}")


if __name__ == "__main__":
    main()
