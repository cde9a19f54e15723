"""What a learner's failure does to the job: it ends it, the first failure named once.

The policy of asrdist-train and asrdist-pretrain-rbm alike, beside the liveness code it relies
on (asrdist.parallel.processes.health). A single learner's error goes up to the CLI as it is. One of
several learners that fails ends the whole job at once rather than at the others' timeouts:
it names its error in one line (a traceback only for what looks like a bug: no AsrdistError,
no OSError, no lost peer) and posts it, so every other learner's heartbeat thread ends too,
naming it. An error that is the consequence of another's failure (the store gone with learner
0, another learner's posted report) names that cause instead of itself.
"""

from __future__ import annotations

import traceback
from collections.abc import Iterator
from contextlib import contextmanager

import torch

from asrdist.errors import AsrdistError, first_line
from asrdist.parallel.processes import health
from asrdist.parallel.processes.preempt import Preemption
from asrdist.parallel.strategy import Learner


@contextmanager
def failure_policy(learner: Learner, preemption: Preemption | None = None) -> Iterator[None]:
    """Run a learner's work under the policy; the default process group, if any, is destroyed
    on the way out. ``preemption``: its signal handlers are restored before an error goes on."""
    try:
        yield
    except Exception as exc:  # noqa: BLE001 - any learner's failure ends the job, first named
        if preemption is not None:
            preemption.restore()
        if learner.world_size == 1:
            raise
        _end_job(learner.rank, exc)
    finally:
        if torch.distributed.is_available() and torch.distributed.is_initialized():
            torch.distributed.destroy_process_group()


def _end_job(rank: int, exc: Exception) -> None:
    """End this learner (and so the job) for ``exc``; never returns."""
    if health.store_lost(exc):
        health.abort(rank, f"{health.lost_store()}: {first_line(exc)}", post=False)
    message = exc.message if isinstance(exc, AsrdistError) \
        else f"{type(exc).__name__}: {first_line(exc)}"
    other = health.other_report(rank)
    # a consequence names the cause; the same error on every learner (a decision all took
    # alike: the run dir in use, a refused --resume) is each learner's own
    if other is not None and other.split(": ", 1)[-1] != message:
        health.abort(rank, f"stopped after another learner failed ({first_line(exc)[:120]})")
    if not isinstance(exc, (AsrdistError, OSError)) and not health.peer_lost(exc):
        traceback.print_exc()
    health.fail(rank, message)
