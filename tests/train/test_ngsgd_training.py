"""asrdist-train --optimizer ngsgd: it learns, and a resumed run continues bit for bit."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from asrdist.errors import AsrdistError
from asrdist.parallel.strategy import Single
from asrdist.testing import make_corpus
from asrdist.train.checkpoint import list_checkpoints
from asrdist.train.trainer import train
from tests.train.corpus import train_config, train_losses

DNN = dict(model="dnn", splice=2, hidden_layers=2, hidden_units=32, chunk_len=10,
           batch_size=8, shuffle_buffer=32, heldout_utts=2, log_every=1, lr=0.05,
           lr_ref_batch=8, warmup_epochs=0.5, optimizer="ngsgd", ng_rank_in=8,
           ng_rank_out=4)


@pytest.fixture
def corpus(tmp_path):
    return make_corpus(tmp_path / "corpus")


def _config(corpus, out, **kw):
    return train_config(corpus, out, DNN, **kw)


def _losses(out: Path) -> list[tuple[int, float]]:
    return train_losses(out / "metrics.jsonl")


def test_ngsgd_run_resumed_from_a_checkpoint_matches_the_straight_run(corpus, tmp_path):
    straight = tmp_path / "straight"
    opts = dict(epochs=50, max_steps=40, checkpoint_every=8, keep_checkpoints=10)
    train(_config(corpus, straight, **opts), Single())
    losses = [loss for _, loss in _losses(straight)]
    assert losses[-1] < 0.5 * losses[0]
    resumed = tmp_path / "resumed"
    shutil.copytree(straight, resumed)
    for step, path in list_checkpoints(resumed, 0).items():
        if step > 16:
            path.unlink()
    (resumed / "final.pt").unlink()
    (resumed / ".train.done").unlink()
    train(_config(corpus, resumed, resume=True, **opts), Single())
    assert _losses(resumed) == _losses(straight)
    assert len(_losses(straight)) == 40


def test_ngsgd_options_are_checked_by_name(corpus, tmp_path):
    with pytest.raises(AsrdistError, match="--ng-rank-in must be positive"):
        _config(corpus, tmp_path / "x", ng_rank_in=0)
    with pytest.raises(AsrdistError, match="--optimizer 'adam'"):
        _config(corpus, tmp_path / "x", optimizer="adam")
