"""One learner process from start to end, whatever launched it: the CLIs that train
(asrdist-train, asrdist-pretrain-rbm) hand their work to :func:`run_learner` and stay thin.

It checks the launcher (torchrun's restarts, an elastic run under a launcher that ends every
learner when one dies), becomes the supervisor of its learner where mpiexec started several
(:mod:`asrdist.parallel.launch.supervise`), takes the stop signals
(:mod:`asrdist.parallel.processes.preempt`), joins the world, makes the process transport with the
run's :class:`ProcessOptions` (shared by the strategy and the work's own collectives, so all run
under its liveness), and runs the work under the failure policy
(:mod:`asrdist.parallel.launch.failure`): a failure ends the job, named.
"""

from __future__ import annotations

import logging
import os
import signal
from collections.abc import Callable, Sequence
from typing import TypeVar

from asrdist.errors import AsrdistError
from asrdist.parallel.launch import rendezvous
from asrdist.parallel.launch.failure import failure_policy
from asrdist.parallel.launch.supervise import supervise_under_mpiexec
from asrdist.parallel.options import ProcessOptions
from asrdist.parallel.processes.preempt import Preemption
from asrdist.parallel.processes.transport import with_transport
from asrdist.parallel.strategy import Learner

log = logging.getLogger(__name__)

R = TypeVar("R")
Work = Callable[[Learner, str, Preemption], R]  # (learner, its device, the stop signals)


def run_learner(device: str, process: ProcessOptions, work: Work[R],
                signals: Sequence[signal.Signals] = (), early: signal.Signals | None = None,
                check_world: Callable[[int], None] | None = None,
                run_dir: str | None = None) -> R:
    """Run ``work`` as this process's learner on ``device`` (``cuda``: the GPU of its local
    rank); ``signals`` stop it at an agreed step (``early``: one that came while the process
    started); ``check_world(world_size)`` refuses options that do not fit the learner count,
    before any rendezvous; ``run_dir`` (--out) holds the run's secret
    (:mod:`asrdist.parallel.processes.secret`) and an elastic run's saved outer state."""
    denv = rendezvous.detect_env()
    if denv is not None and denv.launcher == "torchrun":
        _check_torchrun()
    _warn_launcher_not_elastic(process, denv)
    supervise_under_mpiexec(denv, signals, early)
    preemption = Preemption(signals, early)
    if check_world is not None:
        check_world(denv.world_size if denv is not None else 1)
    process.check_world(denv.world_size if denv is not None else 1)
    learner, device = rendezvous.join_world(device, process.exchange_timeout, process.elastic,
                                        process.bind, run_dir)
    learner = with_transport(learner, process)
    with failure_policy(learner, preemption):
        result = work(learner, device, preemption)
        assert learner.transport is not None
        learner.transport.close()  # after an error the failure policy ends the job instead
    preemption.restore()
    return result


def _warn_launcher_not_elastic(process: ProcessOptions, denv: rendezvous.DistEnv | None) -> None:
    """--elastic survives a lost learner only where the launcher lets the others run on:
    srun with --no-kill --kill-on-bad-exit=0 (local/slurm/train.sbatch), or learners started
    by hand; torchrun's agent and mpiexec end every learner when one dies."""
    if not process.elastic or denv is None or denv.world_size < 2:
        return
    name = "mpiexec" if denv.launcher == "mpi" else \
        "torchrun" if "TORCHELASTIC_RUN_ID" in os.environ else None
    if name is not None:
        log.warning("--elastic under %s: it ends every learner when one dies, so a lost "
                    "learner still ends the run; launch with srun (local/slurm/train.sbatch) "
                    "for an elastic run", name)


def _check_torchrun() -> None:
    """Refuse torchrun's restarts (a restarted learner would join a run the others left); say
    that plain torchrun reports a stop (75) as a failure (1), unlike asrdist-torchrun."""
    restarts = int(os.environ.get("TORCHELASTIC_MAX_RESTARTS", "0") or 0)
    if restarts > 0:
        raise AsrdistError(
            f"torchrun --max-restarts {restarts}: asrdist learners are not restarted in a "
            "running job; use --max-restarts 0 and continue with --resume")
    if not os.environ.get("ASRDIST_TORCHRUN") and os.environ.get("RANK") == "0":
        log.info("under plain torchrun a stop after a checkpoint (75) comes back as status 1; "
                 "asrdist-torchrun (same arguments) returns 75")
