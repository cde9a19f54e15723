"""A simulated run's exported average, written as final.pt, is what decoding loads."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from asrdist.data.dataset import IGNORE
from asrdist.errors import AsrdistError
from asrdist.models.final import load_final
from asrdist.parallel.weights import flat_weights
from asrdist.simulate.corpus import ChunkPool, heldout_figures
from asrdist.simulate.experiment import RunSpec, run
from asrdist.simulate.export import export_final
from asrdist.testing import make_corpus


@pytest.fixture(scope="module")
def pool(tmp_path_factory):
    data, targets = make_corpus(tmp_path_factory.mktemp("export") / "c", num_utts=12)
    return ChunkPool.load(data, targets, chunk_len=5, heldout_utts=3, cmvn="utt")


def test_the_exported_file_holds_the_run_s_final_average(pool, tmp_path):
    spec = RunSpec(algo="ssgd", learners=2, batch=4, epochs=1.0, lr=0.1)
    torch.set_num_threads(1)
    result = run(pool, spec)
    path = export_final(tmp_path / "final.pt", pool, spec, result)
    model, exported = load_final(path)
    assert torch.equal(flat_weights(model), result.final)
    # the last held-out record is of the learners' mean after the final average
    assert heldout_figures(model, pool.heldout)["heldout_ce"] == pytest.approx(
        result.records[-1]["heldout_ce"], rel=1e-5)
    assert (exported.input_dim, exported.num_pdfs, exported.chunk_len) == (13, 5, 5)
    assert (exported.cmvn, exported.algo, exported.world_size) == ("utt", "ssgd", 2)
    assert (exported.left_context, exported.right_context) == (0, 0)
    # priors: every frame's label, counted by hand from the chunks of all utterances
    labels = torch.cat([pool.train.y.reshape(-1), pool.heldout.y.reshape(-1)])
    counts = np.bincount(labels[labels != IGNORE].numpy(), minlength=5)
    assert np.allclose(exported.log_priors, np.log(counts / counts.sum()), atol=1e-6)


def test_weights_of_another_model_are_refused(pool, tmp_path):
    spec = RunSpec(algo="ssgd", learners=1, batch=4, epochs=0.2)
    result = run(pool, spec)
    result.final = result.final[:-1]
    with pytest.raises(AsrdistError, match="final weights have"):
        export_final(tmp_path / "final.pt", pool, spec, result)
    assert not (tmp_path / "final.pt").exists()
