"""A learner exits after ``strategy.close()`` whoever still holds its DDP wrapper.

DDP's reducer owns a C++ reference to its gloo group and is destroyed with the GIL held. Were it
the group's last owner (the wrapper outliving ``destroy_process_group``), the group's destructor
would join the gloo worker threads under the GIL, while a worker freeing a finished collective
whose tensor Python had dropped waits for that GIL: the learner never exits (seen as a rare hang
at the end of a run). ``close()`` destroys the reducer while the group is still registered.
"""

from __future__ import annotations

from tests.parallel.conftest import ok, run_learners


def test_a_learner_exits_when_its_ddp_wrapper_dies_after_destroy_process_group(tmp_path):
    sc = {"algo": "ssgd", "lr": 0.05, "steps": 3, "collective_at_exit": True}
    ok(run_learners(sc, 2, tmp_path, timeout=20))
