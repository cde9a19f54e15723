"""asrdist-torchrun: torchrun (same arguments) whose exit status says what the learners did.

torchrun turns any learner's non-zero exit into its own status 1 and a ``ChildFailedError``
traceback, so a wrapper (``local/slurm/train.sbatch``, a user's script) cannot tell "stopped
after a checkpoint, resume me" (asrdist-train's 75) from a failure. Here torchrun runs in this
process (``torch.distributed.run``) and its outcome is read back:

- every failed learner exited 75: one line, and status 75;
- otherwise one line per failed learner (its rank, exit status or signal), and status 1.

Stop signals reach the learners as they are: torchrun's agent is told not to take SIGTERM and
SIGINT as its own death (its ``--signals-to-handle``), and this process passes SIGTERM,
SIGINT and SIGUSR1 on to the learners it started; each then checkpoints and exits 75 (a
terminal's Ctrl-C, which reaches every learner directly too, counts once). ``--max-restarts``
above 0 is refused at once: a learner restarted by torchrun would join a run the others have
left (each asrdist learner checkpoints and exits on a stop; ``--resume`` continues the run).
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path
from typing import Any

import click

from asrdist.cli import AsrdistCommand, command
from asrdist.errors import AsrdistError
from asrdist.parallel.processes.preempt import STOPPED_STATUS

WRAPPED = "ASRDIST_TORCHRUN"  # set for the learners: asrdist-train knows its 75 gets through
PASSED_ON = (signal.SIGTERM, signal.SIGINT, signal.SIGUSR1)


def _children() -> list[int]:
    """The pids of this process's children (torchrun's learners)."""
    found = []
    for task in Path(f"/proc/{os.getpid()}/task").glob("*/children"):
        try:
            found += [int(p) for p in task.read_text().split()]
        except OSError:
            continue
    return found


def _pass_on(signum: int, _frame: object) -> None:
    for pid in _children():
        try:
            os.kill(pid, signum)
        except ProcessLookupError:
            pass


def _outcome(failures: dict[int, Any]) -> tuple[int, list[str]]:
    """The exit status and the lines that say what the failed learners did."""
    codes = {rank: f.exitcode for rank, f in sorted(failures.items())}
    if codes and all(code == STOPPED_STATUS for code in codes.values()):
        return STOPPED_STATUS, [
            f"asrdist-torchrun: learner(s) {', '.join(map(str, codes))} stopped after a "
            f"checkpoint; continue with --resume (exit status {STOPPED_STATUS})"]
    lines = []
    for rank, code in codes.items():
        how = f"killed by {signal.Signals(-code).name}" if code < 0 else f"exit status {code}"
        lines.append(f"asrdist-torchrun: learner {rank}: {how}")
    return 1, lines


def run_torchrun(args: list[str]) -> int:
    """torchrun with ``args``; the exit status of :func:`_outcome`."""
    from torch.distributed import run as torchrun
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError

    parsed = torchrun.parse_args(args)
    if parsed.max_restarts:
        raise AsrdistError(
            f"--max-restarts {parsed.max_restarts}: asrdist learners are not restarted in a "
            "running job (the others have checkpointed and left); use --max-restarts 0 and "
            "continue with asrdist-train --resume (local/slurm/train.sbatch requeues)")
    os.environ[WRAPPED] = "1"
    parsed.signals_to_handle = ",".join(  # the agent's own death: not SIGTERM, SIGINT
        s for s in (n.strip() for n in parsed.signals_to_handle.split(","))
        if s and s not in ("SIGTERM", "SIGINT")) or "SIGHUP"
    for sig in PASSED_ON:
        signal.signal(sig, _pass_on)
    try:
        torchrun.run(parsed)
    except ChildFailedError as exc:
        status, lines = _outcome(exc.failures)
        for line in lines:
            click.echo(line, err=True)
        return status
    return 0


@command(cls=AsrdistCommand, ignore_unknown_options=True, allow_interspersed_args=False)
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def main(args: tuple[str, ...]) -> None:
    """torchrun's options, then asrdist-train and its options: as torchrun, but a stop after a
    checkpoint exits 75 (not 1), and failed learners are named in one line each."""
    sys.exit(run_torchrun(list(args)))


if __name__ == "__main__":
    main()
