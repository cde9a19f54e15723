"""``python -m asrdist.cli.jobs_worker PREFIX [JOB]``: one job of a stage, as a cluster runs it.

The submitting stage (:mod:`asrdist.jobs.slurm`) wrote ``PREFIX.JOB.in``: the job's maker, its
arguments and the method to call. The job runs it as :class:`asrdist.jobs.LocalRunner`'s
processes do (the same :func:`asrdist.jobs._run`), counts its steps in ``PREFIX.JOB.ticks``
(one byte each) and leaves its result, or its error, in ``PREFIX.JOB.out``: files on the
shared disk, as Kaldi's jobs leave theirs, so a compute node needs no way back to the submitting
host. JOB defaults to ``$SLURM_ARRAY_TASK_ID``. What it prints goes to the job's log; it exits 1
when the job failed, so the cluster counts it failed too. Run by hand, it redoes a failed job.
"""

from __future__ import annotations

import logging
import os
import pickle
import socket
import sys
import time
import traceback

from asrdist.cli import LOG_FORMAT
from asrdist.fsutil import open_output, write_atomically
from asrdist.jobs import _portable, _run


def run_job(base: str) -> int:
    """The job whose files start with ``base`` (``PREFIX.JOB``); its exit status."""
    start = time.time()
    env = os.environ
    where = (f"Slurm job {env['SLURM_ARRAY_JOB_ID']}_{env['SLURM_ARRAY_TASK_ID']} "
             if "SLURM_ARRAY_TASK_ID" in env else "")
    print(f"# {sys.executable} -m asrdist.cli.jobs_worker {base}\n"
          f"# {where}on {socket.gethostname()}, started at {time.ctime(start)}", flush=True)
    with open_output(f"{base}.ticks", "ab", buffering=0) as ticks:
        try:
            with open(f"{base}.in", "rb") as f:
                factory, factory_args, method, args = pickle.load(f)
            value = _run(getattr(factory(*factory_args), method), args,
                         lambda n: ticks.write(b"." * n))
            data = pickle.dumps(("ok", value))
            code = 0
        except Exception as e:  # noqa: BLE001 - every failure goes back to the stage
            traceback.print_exc()
            data = pickle.dumps(("error", _portable(e)))
            code = 1
    sys.stdout.flush()
    sys.stderr.flush()
    write_atomically(f"{base}.out", lambda f: f.write(data), "job result")
    print(f"# Ended (code {code}) at {time.ctime()}, elapsed time {time.time() - start:.0f} "
          "seconds", flush=True)
    return code


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    job = args[1] if len(args) == 2 else os.environ.get("SLURM_ARRAY_TASK_ID")
    if len(args) not in (1, 2) or not job:
        print("usage: python -m asrdist.cli.jobs_worker PREFIX [JOB] (JOB: default "
              "$SLURM_ARRAY_TASK_ID)", file=sys.stderr)
        return 2
    logging.basicConfig(level=logging.INFO, format=LOG_FORMAT)
    return run_job(f"{args[0]}.{job}")


if __name__ == "__main__":
    sys.exit(main())
