"""A simulated run's report, the one layout asrdist-simulate, asrdist-compare and the studies
write: what describes the run, its outcome, and a file written whole or read as missing."""

from __future__ import annotations

import json

import pytest
import torch

import asrdist
from asrdist.data.options import DataOptions
from asrdist.models.build import ModelConfig
from asrdist.simulate import report
from asrdist.simulate.corpus import ChunkPool
from asrdist.simulate.experiment import RunSpec
from asrdist.simulate.run import Result
from asrdist.simulate.speed import SpeedModel
from asrdist.testing import make_corpus

SPEC = RunSpec(algo="ma", learners=2, epochs=2.0, model=ModelConfig(layers=1, units=8),
               reading=DataOptions(batch_size=4, chunk_len=5))


@pytest.fixture(scope="module")
def pool(tmp_path_factory):
    data, targets = make_corpus(tmp_path_factory.mktemp("report") / "c", num_utts=12)
    return ChunkPool.load(data, targets, chunk_len=5, heldout_utts=3)


def _result(**summary) -> Result:
    return Result(records=[{"time_s": 0.0, "heldout_ce": 1.6}], learners=[],
                  final=torch.zeros(1), summary={"host_s": 2.5, **summary},
                  noise=[{"steps": 0, "b_simple": 3.0}])


def test_the_description_stands_on_its_own(pool):
    speed = SpeedModel(latency_s=0.1, bandwidth=1e6)
    about = report.describe(SPEC, speed, pool, {"data": "D"})
    assert list(about) == ["version", "spec", "speed", "cost", "data", "model", "steps"]
    assert about["version"] == asrdist.__version__
    # the strategy's options resolved: its defaults and the run's batch and chunk filled in
    assert (about["spec"]["options"]["avg_period"], about["spec"]["options"]["batch_size"],
            about["spec"]["options"]["chunk_len"]) == (8, 4, 5)
    assert about["spec"]["learners"] == 2 and about["speed"]["latency_s"] == 0.1
    assert about["data"] == {"data": "D", **pool.describe()}
    weights = sum(p.numel() for p in
                  torch.nn.LSTM(13, 8, bidirectional=True).parameters()) + 16 * 5 + 5
    assert about["model"] == {"weights": weights, "bytes": 4 * weights}
    per_epoch = pool.describe()["chunks"]["train"] // 8
    assert about["steps"] == {"per_epoch": per_epoch, "total": 2 * per_epoch}
    # a message: the latency and the model's bytes over the link
    assert about["cost"]["message_s"] == pytest.approx(0.1 + 4 * weights / 1e6)
    given = {"weights": 1, "bytes": 4}
    assert report.describe(SPEC, SpeedModel(), pool, {}, given)["model"] == given


def test_the_report_adds_the_outcome_and_a_writer_s_own_fields():
    failed = {"learner": 1, "step": 3, "time_s": 9.0, "why": "learner 1 lost"}
    got = report.build({"version": "v"}, _result(failed=failed), ["a warning"], key="k")
    assert got == {"version": "v", "key": "k", "warnings": ["a warning"], "failed": failed,
                   "records": [{"time_s": 0.0, "heldout_ce": 1.6}],
                   "summary": {"host_s": 2.5, "failed": failed}, "host_s": 2.5}
    assert report.build({}, _result(), [])["failed"] is None
    assert report.build({}, _result(), [], noise_every=2)["noise_scale"] == [
        {"steps": 0, "b_simple": 3.0}]


def test_a_report_is_read_back_as_written_and_a_damaged_one_is_none(tmp_path):
    path = tmp_path / "run.json"
    written = report.build({"version": "v"}, _result(), [])
    report.write(path, written)
    assert report.read(path) == written
    assert json.loads(path.read_text()) == written and path.read_text().startswith('{\n "')
    path.write_text('{"records": [')
    assert report.read(path) is None
    path.write_text("[1, 2]")  # JSON, but no report
    assert report.read(path) is None
    assert report.read(tmp_path / "none.json") is None
    assert list(tmp_path.iterdir()) == [path]  # no temporary file left beside it
