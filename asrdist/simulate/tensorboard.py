"""A simulated run's held-out records as TensorBoard event files, beside real runs' own.

Each record of :class:`asrdist.simulate.run` becomes ``heldout/NAME`` scalars (``heldout_ce``,
``heldout_acc``, ``dist_to_mean``, ``epochs``, ``time_s``) at the learners' mean step, rounded,
with the simulated clock as the events' wall time: TensorBoard's "relative" axis then reads
simulated seconds, its "step" axis the steps, as asrdist-train's ``heldout/*`` do. A run
written again into the same directory replaces the events written there before.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from asrdist.train.tensorboard import open_mirror


def write_records(logdir: Path, records: Sequence[dict[str, Any]]) -> bool:
    """The records' event files in ``logdir``; False where the tensorboard package is absent
    (said once in the log)."""
    mirror = open_mirror(logdir, 0, resume_step=-1)
    if mirror is None:
        return False
    try:
        for record in records:
            fields = {k: v for k, v in record.items() if k != "steps"}
            mirror.write({"kind": "heldout", "step": round(record["steps"]), **fields},
                         walltime=record["time_s"])
    finally:
        mirror.close()
    return True
