"""The resume rule: never from scratch while checkpoints exist; damaged files fall back."""

from __future__ import annotations

import logging
from pathlib import Path
from types import SimpleNamespace

import pytest

from asrdist.errors import AsrdistError
from asrdist.models.build import ModelConfig
from asrdist.parallel.strategy import Single
from asrdist.testing import make_corpus
from asrdist.train.checkpoint import Pruning, checkpoint_dir, checkpoint_path, list_checkpoints
from asrdist.train.config import make_config
from asrdist.train.metrics import read_metrics
from asrdist.train.resume import Holdings, Shape, check_shape, resume_steps
from asrdist.train.trainer import train

TINY = dict(layers=1, units=8, chunk_len=10, batch_size=8, shuffle_buffer=32, heldout_utts=2,
            log_every=1, lr=0.5, lr_ref_batch=8, epochs=1, checkpoint_every=2,
            keep_checkpoints=2)
OUT = Path("run")


def _held(steps, readable=None, group=(0, 1)):
    readable = steps if readable is None else readable
    return Holdings(tuple(steps), tuple(readable),
                    {s: "BadZipFile" for s in steps if s not in readable}, group)


def test_asynchronous_learners_resume_each_from_its_own_newest():
    # adpsgd keeps 2 checkpoints each; the passive learner ran ahead: no step in common
    everyone = {0: _held([200, 220], group=(0,)), 1: _held([300, 320], group=(1,))}
    assert resume_steps(OUT, everyone, True) == {0: 220, 1: 320}


def test_lockstep_learners_resume_from_their_newest_common_readable_step():
    everyone = {0: _held([20, 30]), 1: _held([20, 30], readable=[20])}
    assert resume_steps(OUT, everyone, True) == {0: 20, 1: 20}
    nodes = {r: _held([10, 20] if r < 2 else [40, 50], group=(0, 1) if r < 2 else (2, 3))
             for r in range(4)}  # hadpsgd: two nodes, each in step, drifting apart
    assert resume_steps(OUT, nodes, True) == {0: 20, 1: 20, 2: 50, 3: 50}


def test_no_usable_common_step_is_an_error_on_every_learner_never_a_restart():
    everyone = {0: _held([20, 30]), 1: _held([20, 30], readable=[])}
    with pytest.raises(AsrdistError, match=r"learner 1: step 20 unreadable .*not retraining"):
        resume_steps(OUT, everyone, True)
    drifted = {0: _held([10]), 1: _held([20])}  # lockstep learners without a common step
    with pytest.raises(AsrdistError, match="no checkpoint step that learner"):
        resume_steps(OUT, drifted, True)


def test_nothing_written_starts_afresh_and_an_async_learner_without_one_starts_at_zero():
    assert resume_steps(OUT, {0: _held([]), 1: _held([])}, True) == {0: None, 1: None}
    late = {0: _held([10], group=(0,)), 1: _held([], group=(1,))}
    assert resume_steps(OUT, late, True) == {0: 10, 1: None}
    with pytest.raises(AsrdistError, match="pass --resume"):
        resume_steps(OUT, late, False)


def _write(out: Path, *steps: int) -> None:
    for step in steps:
        path = checkpoint_path(out, 0, step)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"")


def test_a_lockstep_learner_keeps_its_older_checkpoint_until_the_set_met_past_the_newer(
        tmp_path):
    """Killed after one learner wrote step 50 and dropped 25 while the other was still
    writing 50, the set would share no step: the drop waits for the next meeting."""
    _write(tmp_path, 25, 50)
    every_step = Pruning(tmp_path, 0, keep=1, group_size=2, period=1)
    every_step.saved(50)
    assert sorted(list_checkpoints(tmp_path, 0)) == [25, 50]
    every_step.stepped(51)  # step 51's allreduce: every learner has written 50
    assert sorted(list_checkpoints(tmp_path, 0)) == [50]
    _write(tmp_path, 75)
    averaging = Pruning(tmp_path, 0, keep=1, group_size=2, period=4)  # ma, every 4 steps
    averaging.saved(75)
    for step in (76, 77, 78):
        averaging.stepped(step)
        assert sorted(list_checkpoints(tmp_path, 0)) == [50, 75]
    averaging.stepped(79)
    assert sorted(list_checkpoints(tmp_path, 0)) == [75]
    _write(tmp_path, 100)
    Pruning(tmp_path, 0, keep=1, group_size=1, period=1).saved(100)  # alone: at once
    assert sorted(list_checkpoints(tmp_path, 0)) == [100]


def test_truncated_newest_checkpoint_falls_back_and_tmp_leftovers_go(tmp_path, caplog):
    data, targets = make_corpus(tmp_path / "corpus")
    out = tmp_path / "run"
    config = make_config(None, {"data": str(data), "targets": str(targets), "out": str(out),
                                "max_steps": 4, **TINY})
    train(config, Single())
    for name in ("final.pt", ".train.done"):  # as if killed after step 4
        (out / name).unlink()
    steps = list_checkpoints(out, 0)
    assert sorted(steps) == [2, 4]
    steps[4].write_bytes(steps[4].read_bytes()[:1000])  # a disk that lost the file's tail
    leftover = checkpoint_dir(out, 0) / ".step000000006.pt.abc.tmp"
    leftover.write_bytes(b"partial")
    config.resume = True
    with caplog.at_level(logging.WARNING):
        train(config, Single())
    assert "skips checkpoint step 4 (BadZipFile" in caplog.text
    starts = [r for r in read_metrics(out / "metrics.jsonl") if r["kind"] == "start"]
    assert [(s["step"], s["resumed"]) for s in starts][-1] == (2, True)
    assert not leftover.exists() and (out / "final.pt").is_file()


def test_a_checkpoint_from_before_a_model_option_existed_resumes_with_its_default(tmp_path):
    """A model option added since the checkpoint was written takes its default there; a value
    that really differs is still refused."""
    now = ModelConfig(layers=1, units=8).to_dict()
    before = {k: v for k, v in now.items() if k not in ("conformer_blocks", "conv_kernel")}
    cfg = SimpleNamespace(out=tmp_path, data=tmp_path / "data", targets=tmp_path / "t")
    shape = Shape(input_dim=13, num_pdfs=5, model_config=now, world_size=1)
    check_shape(cfg, {"input_dim": 13, "num_pdfs": 5, "model_config": before,
                      "world_size": 1}, shape)
    with pytest.raises(AsrdistError, match="the model options differ"):
        check_shape(cfg, {"input_dim": 13, "num_pdfs": 5, "world_size": 1,
                          "model_config": {**before, "units": 16}}, shape)
