"""The studies' runs keep their cache keys now that RunSpec holds asrdist-train's option
objects and the studies state their own values (bench/studies/common.py's STUDY_DEFAULTS): a
study's spec built the new way is cached under the key the old RunSpec gave the same run. The
keys below were computed by the code before the change (commit 190ac42: the old Runner's key of
these specs, with 1000 training chunks), not by the code under test."""

from __future__ import annotations

import argparse
import math
from types import SimpleNamespace

import pytest
import torch

from asrdist.data.options import DataOptions
from asrdist.simulate.corpus import ChunkPool
from asrdist.simulate.speed import SpeedModel
from bench.studies import delay1_mixing, large_batch
from bench.studies.common import (
    HADPSGD_NODES_OF_4,
    STUDY_DEFAULTS,
    cache_key,
    cache_values,
    constant_rate,
    study_runs,
    study_spec,
)
from bench.studies.large_batch import Point, make_spec

CHUNKS = 1000
LARGE_BATCH = argparse.Namespace(epochs=6, warmup_epochs=1.0, anneal_start=4,
                                 anneal_factor=math.sqrt(2))
DELAY1 = argparse.Namespace(learners=[4, 16], batches=[8, 32], epochs=1.0, lr=0.1,
                            lr_ref_batch=256, evals=4)


def _key(spec, speed, noise_every=0) -> str:
    return cache_key(cache_values(spec, speed, CHUNKS, noise_every))


def _specs():
    grid = delay1_mixing.grid(DELAY1)
    return {
        "large_batch": (make_spec(LARGE_BATCH, Point("adpsgd-random", 16, 1024), 0.2, seed=2),
                        large_batch.SPEED, 0),
        "large_batch_bmuf_noise": (make_spec(LARGE_BATCH, Point("bmuf", 16, 768), 0.1),
                                   large_batch.SPEED, 5),
        "large_batch_probe": (make_spec(LARGE_BATCH, Point("single", 1, 16), 0.4, epochs=12,
                                        anneal=False), large_batch.SPEED, 0),
        "delay1_main": (grid[0][1], delay1_mixing.SPEED, 0),
        # momentum 0 at ten times the rate
        "delay1_diag": ([s for label, s in grid if label == "diag"][1], delay1_mixing.SPEED, 0),
        # as outer_methods.main's simulate() and stragglers_sim.main build theirs
        "outer_methods": (study_spec(algo="hadpsgd", learners=16, batch_size=16, epochs=1.0,
                                     lr=0.05, options=HADPSGD_NODES_OF_4,
                                     evals=12, seed=1),
                          SpeedModel(compute_s=16 * 21 * 0.01, latency_s=1e-4,
                                     bandwidth=1e9 / 8 * 0.5), 0),
        "stragglers_sim": (study_spec(algo="ssgd", learners=64, batch_size=256 // 64,
                                      epochs=1.0, lr=0.1, evals=8, options={}),
                           SpeedModel(slow={63: 4.0}, bandwidth=1e6, compute_s=1.0,
                                      update_s=0.25, latency_s=0.01), 0),
    }


OLD_KEYS = {
    "large_batch": "a4c80e28846bff95af736f35029e27b4",
    "large_batch_bmuf_noise": "98dc174fb3da86d4e5410dae907d6ca8",
    "large_batch_probe": "162033124cb6ee9b19b33635f5e46bd7",
    "delay1_main": "54e9d364a387d32496b0a0152f5d24ac",
    "delay1_diag": "b7dd7ba9e0fc824d3f391bbb4638b2d0",
    "outer_methods": "ecd018f46cdf064b33b158a61c792d32",
    "stragglers_sim": "b40f59dbe1ccf89bbdb047177d5e9876",
}


@pytest.mark.parametrize("name", sorted(OLD_KEYS))
def test_a_study_s_spec_keeps_the_key_the_old_runspec_gave_it(name):
    spec, speed, noise_every = _specs()[name]
    assert _key(spec, speed, noise_every) == OLD_KEYS[name]


def test_the_studies_run_cache_names_its_runs_by_the_old_keys(monkeypatch, tmp_path):
    """study_runs: the package's run cache on the corpus as the studies loaded it (100
    held-out utterances, one thread), its runs named by the old keys."""
    loaded, threads = [], []
    monkeypatch.setattr(ChunkPool, "load", lambda *a, **kw: loaded.append((a, kw)) or
                        SimpleNamespace(train=range(CHUNKS)))
    monkeypatch.setattr(torch, "set_num_threads", threads.append)
    runs = study_runs("DATA", "TARGETS", str(tmp_path / "cache"), max_utts=7)
    assert loaded == [(("DATA", "TARGETS"), {"heldout_utts": 100, "max_utts": 7})]
    assert threads == [1] and (tmp_path / "cache").is_dir()
    for name in ("stragglers_sim", "large_batch_bmuf_noise"):
        spec, speed, noise_every = _specs()[name]
        assert runs.key(spec, speed, noise_every) == OLD_KEYS[name]
    with pytest.raises(ValueError, match="no place for lost learners"):
        runs.key(spec, speed, 0, {1: 0.5})


def test_the_studies_state_the_values_they_ran_with_the_old_runspec():
    # the old RunSpec's defaults, which the studies left unset
    s = STUDY_DEFAULTS
    assert (s.batch, s.epochs, s.grad_clip, s.model.layers, s.model.units) == (16, 1.0, 5.0, 1, 64)
    assert (s.schedule.lr, s.optim.momentum, s.optim.nesterov, s.optim.weight_decay) == \
        (0.1, 0.9, False, 0.0)
    assert s.schedule == constant_rate(0.1)


def test_a_value_the_old_layout_had_no_place_for_changes_the_key():
    base = study_spec(algo="ssgd", learners=4)
    speed = SpeedModel()
    other = base.replace(reading=DataOptions(batch_size=16, shuffle_buffer=64))
    assert _key(other, speed) != _key(base, speed)
    # and a schedule that is not constant is a schedule: not the constant rate's key
    assert _key(base.replace(warmup_epochs=1.0), speed) != _key(base, speed)
