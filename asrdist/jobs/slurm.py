"""slurm.pl: a stage's ``--nj`` jobs as one Slurm job array, as Kaldi's slurm.pl submits them.

Each call of a stage's jobs (:meth:`asrdist.jobs.Jobs.call_each`) is one ``sbatch --array=1-NJ``
(``%M`` with ``--max-jobs-run M``, Slurm holding the rest back) of ``python -m
asrdist.cli.jobs_worker``, with the job's ``--mem``, ``--time``, ``--cpus-per-task`` and
``--gres=gpu:N``. Job n's log is ``LOG_DIR/<task>.n.log``; its input, progress and result are
files in ``LOG_DIR/q`` (a shared disk, as Kaldi needs: no connection back to this host). The stage
waits for every result, watching squeue for a job that ended without one (killed for memory or
time, its node lost); the first failure cancels the rest and is raised naming the job, its log
and the log's last lines. A job is made again in each call (Kaldi's jobs reload what they need
too): the stages that take ``--cmd`` call their jobs once.
"""

from __future__ import annotations

import contextlib
import pickle
import shlex
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol

from asrdist.errors import AsrdistError, first_line
from asrdist.fsutil import atomic_write
from asrdist.jobs import Jobs, Runner
from asrdist.progress import Progress

POLL_S = 0.5  # how often the result and progress files are looked at
SQUEUE_EVERY_S = 3.0  # how often squeue is asked which jobs still run
GRACE_S = 5.0  # a job squeue no longer lists may still be writing its result (a slow NFS)
SQUEUE_PATIENCE_S = 120.0  # squeue failing this long in a row (slurmctld gone) ends the wait
LOG_LINES = 5  # a failed job's log lines in its error
_WAITING = {"PENDING", "RUNNING", "CONFIGURING", "COMPLETING", "SUSPENDED", "REQUEUED",
            "REQUEUE_HOLD", "REQUEUE_FED", "RESIZING", "SIGNALING", "STAGE_OUT"}


class SlurmOptions(Protocol):
    """What sbatch is told of each job (a parsed ``--cmd``: asrdist.jobs.cmd.Cmd)."""

    mem: str | None
    time: str | None
    num_threads: int
    gpu: int
    partition: str | None
    max_jobs_run: int | None


class SlurmRunner(Runner):
    """Jobs submitted with sbatch; logs in ``log_dir``."""

    def __init__(self, log_dir: Path, cmd: SlurmOptions) -> None:
        self.log_dir, self.cmd = log_dir, cmd

    def start(self, name: str, factory: Callable[..., Any], args: Sequence[tuple]) -> Jobs:
        return _SlurmJobs(self, name, factory, args)

    def sbatch_options(self, name: str, count: int) -> list[str]:
        """sbatch's options for ``count`` jobs of task ``name``."""
        cmd, log_dir = self.cmd, self.log_dir.resolve()
        throttle = f"%{cmd.max_jobs_run}" if cmd.max_jobs_run else ""
        options = ["--parsable", f"--job-name={name}", f"--array=1-{count}{throttle}",
                   f"--output={log_dir / name}.%a.log", f"--chdir={Path.cwd()}",
                   "--ntasks=1", f"--cpus-per-task={cmd.num_threads}"]
        options += [f"--mem={cmd.mem}"] if cmd.mem else []
        options += [f"--time={cmd.time}"] if cmd.time else []
        options += [f"--gres=gpu:{cmd.gpu}"] if cmd.gpu else []
        options += [f"--partition={cmd.partition}"] if cmd.partition else []
        return options


def _slurm(*command: str) -> str:
    """A Slurm client command's stdout; its failure is one line with its stderr."""
    try:
        proc = subprocess.run(command, capture_output=True, text=True, timeout=60)
    except FileNotFoundError:
        raise AsrdistError(f"slurm.pl: {command[0]} not found: is this a Slurm submit host? "
                           "(or use --cmd run.pl)") from None
    except subprocess.TimeoutExpired:
        raise AsrdistError(f"slurm.pl: {command[0]} gave no answer in 60 s") from None
    if proc.returncode != 0:
        raise AsrdistError(f"slurm.pl: {command[0]} failed: "
                           f"{' '.join(proc.stderr.split()) or f'exit code {proc.returncode}'}")
    return proc.stdout


class _SlurmJobs(Jobs):
    """A stage's jobs on Slurm: made, and called, in a job array per call."""

    def __init__(self, runner: SlurmRunner, name: str, factory: Callable[..., Any],
                 args: Sequence[tuple]) -> None:
        super().__init__(name, len(args))
        self.runner, self.factory, self.factory_args = runner, factory, list(args)
        self.queue = runner.log_dir / "q"

    def log(self, job: int) -> Path:
        """Job ``job``'s (0-based) log, as Kaldi names it: log/decode.3.log for the third."""
        return self.runner.log_dir / f"{self.name}.{job + 1}.log"

    def _file(self, job: int, suffix: str) -> Path:
        """Job ``job``'s (0-based) input (.in), progress (.ticks) or result (.out)."""
        return self.queue / f"{self.name}.{job + 1}{suffix}"

    def call_each(self, method: str, args: Sequence[tuple], progress: Progress | None = None
                  ) -> list:
        if len(args) != self.count:
            raise ValueError(f"{len(args)} argument tuples for {self.count} jobs")
        if not args:  # sbatch refuses an empty array
            return []
        self.queue.mkdir(parents=True, exist_ok=True)
        for job, job_args in enumerate(args):
            for suffix in (".out", ".ticks"):  # a previous call's
                self._file(job, suffix).unlink(missing_ok=True)
            with atomic_write(self._file(job, ".in"), "wb") as f:  # never through a link
                f.write(pickle.dumps((self.factory, self.factory_args[job], method, job_args)))
        script = self.queue / f"{self.name}.sh"
        worker = [sys.executable, "-m", "asrdist.cli.jobs_worker",
                  str((self.queue / self.name).resolve())]
        with atomic_write(script) as f:
            f.write("#!/bin/bash\n" + shlex.join(worker) + ' "$SLURM_ARRAY_TASK_ID"\n')
        array = _slurm("sbatch", *self.runner.sbatch_options(self.name, self.count),
                       str(script.resolve())).strip().split(";")[0]
        try:
            results = self._wait(array, progress)
        except BaseException:
            with contextlib.suppress(AsrdistError):
                _slurm("scancel", array)
            raise
        for job in range(self.count):  # a failed call's stay, to rerun a job by hand
            for suffix in (".in", ".out", ".ticks"):
                self._file(job, suffix).unlink(missing_ok=True)
        return results

    def _wait(self, array: str, progress: Progress | None) -> list:
        """Every job's result, in job order; the first failure raised."""
        results: dict[int, Any] = {}
        ticks = [0] * self.count
        gone: dict[int, tuple[float, str]] = {}  # job -> (when squeue lost it, its last state)
        asked, squeue_ok = 0.0, time.monotonic()
        while len(results) < self.count:
            for job in set(range(self.count)) - set(results):
                steps = self._file(job, ".ticks")
                if progress is not None and steps.is_file():
                    n = steps.stat().st_size
                    progress.update(n - ticks[job])
                    ticks[job] = n
                out = self._file(job, ".out")
                if out.is_file():
                    kind, value = pickle.loads(out.read_bytes())
                    if kind == "error":
                        raise self._failed(self._error(value[0], job), job) from value[0]
                    results[job] = value
            now = time.monotonic()
            if len(results) < self.count and now - asked >= SQUEUE_EVERY_S:
                asked = now
                try:
                    states = self._states(array)
                    squeue_ok = now
                except AsrdistError:
                    if now - squeue_ok > SQUEUE_PATIENCE_S:
                        raise
                    states = None
                for job in set(range(self.count)) - set(results) if states is not None else ():
                    state = states.get(job + 1)
                    if state in _WAITING:
                        gone.pop(job, None)
                        continue
                    first, last = gone.get(job, (now, "no longer listed"))
                    gone[job] = (first, state or last)
                    if now - first > GRACE_S:
                        raise self._failed(AsrdistError(
                            f"{self.label(job)}: Slurm job {array}_{job + 1} ended "
                            f"({gone[job][1]}) without a result (killed for memory or time?)"),
                            job)
            if len(results) < self.count:
                time.sleep(POLL_S)
        return [results[job] for job in range(self.count)]

    @staticmethod
    def _states(array: str) -> dict[int, str]:
        """Array index -> state of the array's jobs that squeue still lists."""
        try:
            out = _slurm("squeue", "-h", "-r", "-j", array, "-t", "all", "-o", "%K %T")
        except AsrdistError as e:
            if "Invalid job id" in e.message:  # every job ended and was purged
                return {}
            raise
        states = {}
        for line in out.splitlines():
            index, _, state = line.strip().partition(" ")
            if index.isdigit():
                states[int(index)] = state.strip()
        return states

    def _error(self, exc: BaseException, job: int) -> AsrdistError:
        """The job's error as one line naming it (its traceback is in its log)."""
        if isinstance(exc, AsrdistError):
            return AsrdistError(f"{self.label(job)}: {exc.message}")
        return AsrdistError(f"{self.label(job)}: {type(exc).__name__}: {first_line(exc)}")

    def _failed(self, exc: AsrdistError, job: int) -> AsrdistError:
        """``exc`` naming the job's log, then the log's last lines."""
        log = self.log(job)
        try:
            lines = [s.rstrip() for s in log.read_text(errors="replace").replace("\r", "\n")
                     .splitlines() if s.strip()][-LOG_LINES:]
        except OSError as e:
            lines = [f"(cannot read it: {e.strerror})"]
        exc.message = f"{exc.message} (log: {log})" + "".join(f"\n  {line}" for line in lines)
        exc.args = (exc.message,)
        return exc

    def close(self) -> None:
        """Nothing runs between calls."""
