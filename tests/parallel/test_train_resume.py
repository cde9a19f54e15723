"""asrdist-train with 2 learners and every strategy: stop mid-run, resume from the checkpoints.

Learners are forked from the test process (torch already imported, so each starts in
milliseconds) with the environment torchrun gives, and run the real CLI.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from asrdist.train.checkpoint import list_checkpoints, load_checkpoint
from asrdist.train.metrics import metrics_path, read_metrics
from tests.parallel.cli_learners import TINY_MODEL, start_learners
from tests.train.corpus import train_losses

TINY = [*TINY_MODEL, "--log-every=1", "--epochs=2",
        "--checkpoint-every=3", "--exchange-timeout=30", "--distance-every=0"]

ADAMW = ["--optimizer=adamw", "--lr=0.01", "--weight-decay=0.01"]
TDNNF = ["--model=tdnnf", "--tdnnf-layers=5", "--tdnnf-dim=12", "--tdnnf-bottleneck=4",
         "--dropout=0.2"]


def _train(corpus, out: Path, algo: str, *extra: str) -> None:
    procs = start_learners(corpus, out, algo, *TINY, *extra)
    for p in procs:
        p.join(60)
    for r, p in enumerate(procs):
        if p.exitcode is None:
            for q in procs:
                q.kill()
            pytest.fail(f"learner {r} of {algo} still running after 60 s")
        assert p.exitcode == 0, (out / f"err{r}.txt").read_text()[-3000:]


def _losses(out: Path, rank: int) -> list[tuple[int, float]]:
    return train_losses(metrics_path(out, rank))


@pytest.mark.parametrize(("algo", "extra", "deterministic"), [
    ("ssgd", [], True),
    ("ma", ["--avg-period=2"], True),
    ("ma", ["--avg-period=2", "--compress=int8"], True),  # its residuals in the checkpoints
    ("bmuf", ["--avg-period=3"], True),
    ("diloco", ["--avg-period=3"], True),
    ("adpsgd-fixed", [], False),
    ("adpsgd-random", [], False),
    ("adpsgd-delay1", [], False),
    ("hadpsgd", ["--learners-per-node=1", "--hadpsgd-variant=random"], False),
    # AdamW's moments stay with each learner (DiLoCo's inner state is local), checkpointed
    ("ssgd", ADAMW, True),
    ("diloco", ["--avg-period=3", *ADAMW], True),
    ("adpsgd-random", ADAMW, False),
    # TDNN-F: its semi-orthogonal steps and dropout schedule follow the trainer's step
    ("ssgd", TDNNF, True),
])
def test_two_learners_stop_and_resume(corpus, tmp_path, algo, extra, deterministic):
    out = tmp_path / "run"
    _train(corpus, out, algo, *extra, "--max-steps=4")
    assert (out / "final.pt").is_file()
    for name in ("final.pt", ".train.done"):  # as if the run had been killed after step 4
        (out / name).unlink()
    _train(corpus, out, algo, *extra, "--resume")
    assert (out / "final.pt").is_file()
    total = []
    for rank in range(2):
        starts = [r for r in read_metrics(metrics_path(out, rank)) if r["kind"] == "start"]
        assert [(s["step"], s["resumed"]) for s in starts] == [(0, False), (4, True)]
        last = max(list_checkpoints(out, rank))
        state = load_checkpoint(out, rank, last)
        assert state["step"] == last and "steps" not in state["strategy"]  # the trainer's count
        if extra[-len(ADAMW):] == ADAMW:
            moments = state["optimizer"]["state"][0]
            assert {"exp_avg", "exp_avg_sq"} <= set(moments) and moments["exp_avg"].abs().sum() > 0
        total.append(_losses(out, rank)[-1][0])
        if algo in ("ma", "bmuf", "diloco"):  # averaging keyed on the trainer's step: at the
            period = int(extra[0].split("=")[1])  # same steps after resume
            record = [r for r in read_metrics(metrics_path(out, rank)) if r["kind"] == "train"]
            assert all(r["averages"] == r["step"] // period for r in record)
    assert total[0] == total[1] == last > 4  # every learner takes the same number of steps
    if deterministic:  # synchronous strategies: the resumed run is the uninterrupted one
        reference = tmp_path / "reference"
        _train(corpus, reference, algo, *extra)
        for rank in range(2):
            assert _losses(out, rank) == _losses(reference, rank)
