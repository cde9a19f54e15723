from __future__ import annotations

import pytest
import torch

from asrdist.errors import AsrdistError
from asrdist.simulate.corpus import ChunkPool, heldout_figures
from asrdist.testing import make_corpus


@pytest.fixture(scope="module")
def pool(tmp_path_factory):
    data, targets = make_corpus(tmp_path_factory.mktemp("pool") / "c", num_utts=16)
    return ChunkPool.load(data, targets, chunk_len=5, heldout_utts=3)


def test_n_learners_slices_are_one_learners_batch(pool):
    """ssgd's invariant on real data: learners' slices of a step are the big batch."""
    per_epoch = pool.steps_per_epoch(12)
    for step in (0, per_epoch + 1):  # the second epoch draws a new permutation
        big_x, big_y = pool.batch(0, step, 1, 12, seed=4)
        parts = [pool.batch(i, step, 4, 3, seed=4) for i in range(4)]
        assert torch.equal(torch.cat([p[0] for p in parts]), big_x)
        assert torch.equal(torch.cat([p[1] for p in parts]), big_y)
    first = pool.batch(0, 0, 1, 12, seed=4)[1]
    assert not torch.equal(first, pool.batch(0, per_epoch, 1, 12, seed=4)[1])
    assert pool.train.x.shape[1:] == (5, 13) and pool.input_dim == 13


def test_heldout_figures_of_a_perfect_and_a_blind_model(pool):
    class Oracle(torch.nn.Module):
        def __init__(self, logits):
            super().__init__()
            self.logits, self.i = logits, 0

        def forward(self, x):
            out = self.logits[self.i : self.i + len(x)]
            self.i += len(x)
            return out

    y = pool.heldout.y.clamp(min=0)
    perfect = torch.nn.functional.one_hot(y, pool.num_pdfs).float() * 50
    figures = heldout_figures(Oracle(perfect), pool.heldout, batch=7)
    assert figures["heldout_acc"] == 1.0 and figures["heldout_ce"] < 1e-6
    blind = heldout_figures(Oracle(torch.zeros_like(perfect)), pool.heldout, batch=7)
    assert blind["heldout_ce"] == pytest.approx(torch.log(torch.tensor(5.0)).item())


def test_a_batch_larger_than_the_corpus(pool):
    with pytest.raises(AsrdistError, match="global batch"):
        pool.steps_per_epoch(len(pool.train) + 1)
