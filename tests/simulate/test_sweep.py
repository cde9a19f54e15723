"""A comparison's runs: each cell's key, which names what its figures depend on and decides
whether a run on disk is kept, and what happens to a damaged run file."""

from __future__ import annotations

import json

import pytest
import torch

from asrdist.data.options import DataOptions
from asrdist.models.build import ModelConfig
from asrdist.simulate.corpus import ChunkPool
from asrdist.simulate.experiment import RunSpec
from asrdist.simulate.grid import parse_arm, parse_scenario
from asrdist.simulate.speed import SpeedModel
from asrdist.simulate.sweep import Cell, Sweep
from asrdist.testing import make_corpus
from asrdist.train.schedule import constant_rate

BASE = RunSpec(algo="ssgd", learners=2, epochs=1.0, evals=2,
               model=ModelConfig(layers=1, units=8),
               reading=DataOptions(batch_size=4, chunk_len=5), schedule=constant_rate(0.3))
SOURCE = {"data": "DATA", "targets": "TARGETS", "max_utts": 0}
# computed by the code before the run cache was shared with the studies (sweep.py's key at
# 576ac02): the runs a comparison has on disk are kept as long as these hold; a new field of
# RunSpec changes them, and every comparison's runs are then redone
KEYS = {("ssgd", "none"): "9f99769b1a9dc84d",
        ("adpsgd-random", "straggler:0x2+lost:1@0.5"): "aa4a20a5164598f1"}


@pytest.fixture(scope="module")
def pool(tmp_path_factory):
    data, targets = make_corpus(tmp_path_factory.mktemp("sweep") / "c", num_utts=12)
    return ChunkPool.load(data, targets, chunk_len=5, heldout_utts=3)


def _sweep(pool, runs_dir, said=None) -> Sweep:
    return Sweep(pool, BASE, SpeedModel(latency_s=0.05), runs_dir, SOURCE,
                 (said if said is not None else []).append)


def _cell(algo: str, scenario: str, seed: int = 1) -> Cell:
    return Cell(parse_arm(algo), parse_scenario(scenario), seed)


@pytest.mark.parametrize(("algo", "scenario"), sorted(KEYS))
def test_a_cell_keeps_the_key_it_had(pool, tmp_path, algo, scenario):
    assert _sweep(pool, tmp_path).key(_cell(algo, scenario)) == KEYS[algo, scenario]


def test_a_damaged_run_file_is_rerun_and_then_kept(pool, tmp_path):
    torch.set_num_threads(1)
    said: list[str] = []
    sweep, cell = _sweep(pool, tmp_path, said), _cell("ssgd", "none")
    path = tmp_path / cell.file_name()
    path.write_text('{"key": ')  # cut short, as by a full disk
    [report] = sweep([cell])
    assert json.loads(path.read_text()) == report
    assert report["key"] == sweep.key(cell) and "(host " in said[-1]
    assert sweep([cell]) == [report] and said[-1].endswith("(kept)")
