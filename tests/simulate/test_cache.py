"""The run cache: a run is made once and found again by its key, under the default key or a
caller's, and a report the studies' cache wrote in its older layout is read in today's."""

from __future__ import annotations

import json

import pytest
import torch

from asrdist.data.options import DataOptions
from asrdist.models.build import ModelConfig
from asrdist.models.final import load_final
from asrdist.simulate import report
from asrdist.simulate.cache import RunCache, run_key
from asrdist.simulate.corpus import ChunkPool
from asrdist.simulate.experiment import RunSpec
from asrdist.simulate.speed import SpeedModel
from asrdist.testing import make_corpus
from asrdist.train.schedule import constant_rate

SPEC = RunSpec(algo="ssgd", learners=2, epochs=1.0, evals=2, model=ModelConfig(layers=1, units=8),
               reading=DataOptions(batch_size=4, chunk_len=5), schedule=constant_rate(0.3))
SPEED = SpeedModel(latency_s=0.05)
SOURCE = {"data": "DATA", "targets": "TARGETS"}


@pytest.fixture(scope="module")
def pool(tmp_path_factory):
    torch.set_num_threads(1)
    data, targets = make_corpus(tmp_path_factory.mktemp("cache") / "c", num_utts=12)
    return ChunkPool.load(data, targets, chunk_len=5, heldout_utts=3)


def test_a_run_is_made_once_and_found_again(pool, tmp_path):
    runs = RunCache(pool, tmp_path / "runs", SOURCE)
    assert not runs.cached(SPEC, SPEED)
    made = runs(SPEC, SPEED)
    key = runs.key(SPEC, SPEED)
    assert key == run_key(SPEC, SPEED, {**SOURCE, **pool.describe()})
    assert [p.name for p in (tmp_path / "runs").iterdir()] == [f"{key}.json"]
    assert (made["key"], made["lost"], made["failed"]) == (key, [], None)
    assert made["data"] == {**SOURCE, **pool.describe()} and made["host_s"] > 0
    # the spec as given: no start-of-run evaluation forced, as a comparison forces it
    assert not made["spec"]["eval_start"] and made["records"][0]["steps"] > 0
    assert runs.host_s == made["host_s"]
    again = RunCache(pool, tmp_path / "runs", SOURCE)
    assert again.cached(SPEC, SPEED) and again(SPEC, SPEED) == made
    assert again.host_s == 0.0 and runs(SPEC, SPEED) == made and runs.host_s == made["host_s"]


def test_the_default_key_is_of_the_run_s_noise_probe_and_lost_learners(pool, tmp_path):
    runs = RunCache(pool, tmp_path, SOURCE)
    keys = {runs.key(SPEC, SPEED), runs.key(SPEC, SPEED, noise_every=2),
            runs.key(SPEC, SPEED, lost={1: 0.5}), runs.key(SPEC.replace(seed=1), SPEED),
            RunCache(pool, tmp_path, {"data": "ELSEWHERE"}).key(SPEC, SPEED)}
    assert len(keys) == 5


def test_a_caller_s_key_names_the_runs(pool, tmp_path):
    asked = []

    def key(spec, speed, noise_every, lost):
        asked.append((spec, speed, noise_every, lost))
        return f"mine-{spec.seed}"

    runs = RunCache(pool, tmp_path, SOURCE, key)
    made = runs(SPEC, SPEED, noise_every=3)
    assert asked == [(SPEC, SPEED, 3, None)]
    assert [p.name for p in tmp_path.iterdir()] == ["mine-0.json"]
    assert made["key"] == "mine-0" and made["noise_scale"][0]["steps"] == 0


def test_an_older_report_s_noise_is_read_as_noise_scale_and_its_file_left(pool, tmp_path):
    old = {"spec": {"algo": "ssgd"}, "records": [{"heldout_ce": 1.5}], "summary": {},
           "host_s": 3.0, "noise": [{"steps": 0, "b_simple": 2.0}]}
    text = json.dumps(old)  # as the studies' cache wrote it: no indent
    (tmp_path / "k.json").write_text(text)
    runs = RunCache(pool, tmp_path, SOURCE, lambda *_: "k")
    found = runs(SPEC, SPEED, noise_every=5)
    assert "noise" not in found and found["noise_scale"] == old["noise"]
    assert found["records"] == old["records"] and runs.host_s == 0.0
    assert (tmp_path / "k.json").read_text() == text


def test_a_damaged_report_is_not_cached_and_is_run_again(pool, tmp_path):
    runs = RunCache(pool, tmp_path, SOURCE)
    path = tmp_path / f"{runs.key(SPEC, SPEED)}.json"
    path.write_text('{"records": ')
    assert not runs.cached(SPEC, SPEED)
    made = runs(SPEC, SPEED)
    assert report.read(path) == made and runs.cached(SPEC, SPEED)


def test_export_writes_the_run_s_average_as_a_final_pt(pool, tmp_path):
    runs = RunCache(pool, tmp_path / "runs", SOURCE)
    last = runs.export(SPEC, SPEED, tmp_path / "final.pt")
    assert last == runs(SPEC, SPEED)["records"][-1]  # the same run, seeded
    _, exported = load_final(tmp_path / "final.pt")
    assert (exported.algo, exported.world_size, exported.chunk_len) == ("ssgd", 2, 5)
