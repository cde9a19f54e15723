"""A run's identity between real learners (asrdist-train's CLI, forked): the learner count is
part of it, and learners started with different options are refused together."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from asrdist.cli.train import main as train_main
from asrdist.parallel.strategy import Single
from asrdist.stage import Skipped
from asrdist.testing import make_corpus
from asrdist.train.config import make_config
from asrdist.train.trainer import train
from tests.parallel.cli_learners import TINY_MODEL, fork_learners, join_learners, start_learners

RUN = [*TINY_MODEL, "--epochs=1", "--exchange-timeout=20", "--distance-every=0"]


@pytest.fixture
def corpus(tmp_path):
    return make_corpus(tmp_path / "corpus")


def test_another_learner_count_is_not_skipped(corpus, tmp_path):
    out = tmp_path / "run"
    procs = start_learners(corpus, out, "ssgd", *RUN)
    assert join_learners(procs, out) == [0, 0], (out / "err0.txt").read_text()[-2000:]
    two = (out / "final.pt").read_bytes()
    data, targets = corpus
    config = make_config(None, {"data": str(data), "targets": str(targets), "out": str(out),
                                "algo": "ssgd", "layers": 1, "units": 8, "chunk_len": 10,
                                "batch_size": 4, "shuffle_buffer": 16, "heldout_utts": 2,
                                "lr_ref_batch": 8, "epochs": 1})
    assert not isinstance(train(config, Single()), Skipped)  # one learner: another run
    moved = list((out / "superseded").glob("*/final.pt"))
    assert [m.read_bytes() for m in moved] == [two]


def test_learners_with_different_options_are_refused_naming_them(corpus, tmp_path):
    data, targets = corpus
    out = tmp_path / "run"
    args = ["--data", str(data), "--targets", str(targets), "--out", str(out), "--algo", "ssgd",
            *RUN]

    def main(argv: list[str]) -> None:  # learner 1 was given another --lr
        train_main(argv + (["--lr=0.25"] if os.environ["RANK"] == "1" else []))

    procs = fork_learners(main, args, out)
    assert join_learners(procs, out) == [1, 1]
    for rank in range(2):
        err = (out / f"err{rank}.txt").read_text()
        assert "the learners were started with different options (--lr: learner 0 " in err, err
        assert "learner 1 0.25)" in err and "Traceback" not in err
    assert not (out / "final.pt").exists() and not Path(out / "checkpoints").exists()
