"""A simulated run's exported average, written as final.pt, is what decoding loads."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from asrdist.data.dataset import IGNORE
from asrdist.data.options import DataOptions
from asrdist.errors import AsrdistError
from asrdist.models.build import ModelConfig
from asrdist.models.final import load_final
from asrdist.parallel.rules.weights import flat_weights
from asrdist.simulate.corpus import ChunkPool, heldout_figures
from asrdist.simulate.experiment import RunSpec, run
from asrdist.simulate.export import export_final
from asrdist.simulate.speed import SpeedModel
from asrdist.testing import make_corpus
from asrdist.train.schedule import constant_rate

# a 1x64 BLSTM at a constant rate, the gradient clipped at 5 (RunSpec's defaults are
# asrdist-train's 4x512 under its schedule)
SMALL = dict(model=ModelConfig(layers=1, units=64), grad_clip=5.0, epochs=1.0)


def _spec(algo: str, learners: int, lr: float = 0.1, **more) -> RunSpec:
    return RunSpec(algo=algo, learners=learners, reading=DataOptions(batch_size=4),
                   schedule=constant_rate(lr), **{**SMALL, **more})


@pytest.fixture(scope="module")
def pool(tmp_path_factory):
    data, targets = make_corpus(tmp_path_factory.mktemp("export") / "c", num_utts=12)
    return ChunkPool.load(data, targets, chunk_len=5, heldout_utts=3, cmvn="utt")


def test_the_exported_file_holds_the_run_s_final_average(pool, tmp_path):
    spec = _spec("ssgd", 2)
    torch.set_num_threads(1)
    result = run(pool, spec)
    path = export_final(tmp_path / "final.pt", pool, spec, result)
    model, exported = load_final(path)
    assert torch.equal(flat_weights(model), result.final)
    # the last held-out record is of the exported weights themselves
    assert heldout_figures(model, pool.heldout)["heldout_ce"] == result.records[-1]["heldout_ce"]
    assert (exported.input_dim, exported.num_pdfs, exported.chunk_len) == (13, 5, 5)
    assert (exported.cmvn, exported.algo, exported.world_size) == ("utt", "ssgd", 2)
    assert (exported.left_context, exported.right_context) == (0, 0)
    assert exported.feats_config == pool.feats_config is not None  # decoding checks it
    # priors: every frame's label, counted by hand from the chunks of all utterances
    labels = torch.cat([pool.train.y.reshape(-1), pool.heldout.y.reshape(-1)])
    counts = np.bincount(labels[labels != IGNORE].numpy(), minlength=5)
    assert np.allclose(exported.log_priors, np.log(counts / counts.sum()), atol=1e-6)


@pytest.mark.parametrize("evals", [1, 2, 3, 4, 6, 12])
def test_the_last_record_is_the_exported_final_pt_s_for_every_evals(pool, tmp_path, evals):
    """An asynchronous run with a straggler, whose learners' mean before the strategy's end
    is not what it exports: the last record is the exported final.pt's, evaluated anew, also
    when the evaluations fall on the last step (12 steps: every divisor of 12)."""
    spec = _spec("adpsgd-random", 2, 0.2, evals=evals, eval_start=True)
    result = run(pool, spec, SpeedModel.with_slow("1:3", jitter=0.3))
    model, _ = load_final(export_final(tmp_path / "final.pt", pool, spec, result))
    assert not torch.equal(torch.stack(result.learners).mean(0), result.final)
    records = result.records
    last = records[-1]
    assert heldout_figures(model, pool.heldout) == {k: last[k] for k in ("heldout_ce",
                                                                          "heldout_acc")}
    assert [r["steps"] for r in records] == [12 * k / evals for k in range(evals + 1)]
    assert [r.get("final", False) for r in records] == [False] * evals + [True]
    assert records[0]["heldout_ce"] > last["heldout_ce"]  # the start, before training


def test_weights_of_another_model_are_refused(pool, tmp_path):
    spec = _spec("ssgd", 1, epochs=0.2)
    result = run(pool, spec)
    result.final = result.final[:-1]
    with pytest.raises(AsrdistError, match="final weights have"):
        export_final(tmp_path / "final.pt", pool, spec, result)
    assert not (tmp_path / "final.pt").exists()
