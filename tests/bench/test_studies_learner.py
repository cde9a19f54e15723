"""The studies' sleep-based learner: every layer's simulated compute runs, forward and
backward, and a slowed learner sleeps that much longer."""

from __future__ import annotations

import time

import torch

from bench.studies.learner import Config, heldout_ce, make_model, task


def _step_seconds(model: torch.nn.Module, cfg: Config) -> float:
    x, y = task(cfg.width, cfg.batch, seed=1)
    t0 = time.perf_counter()
    torch.nn.functional.cross_entropy(model(x), y).backward()
    return time.perf_counter() - t0


def test_sim_compute_sleeps_the_whole_budget_scaled_by_the_slow_down():
    cfg = Config("ssgd", steps=1, width=8, layers=2, batch=4, sim_ms=60)
    assert _step_seconds(make_model(cfg), cfg) >= 0.058
    assert _step_seconds(make_model(cfg, 2.0), cfg) >= 0.118


def test_heldout_ce_skips_the_sleeps_and_starts_near_chance():
    cfg = Config("ssgd", steps=1, width=16, layers=1, batch=4, sim_ms=10_000)
    t0 = time.perf_counter()
    ce = heldout_ce(make_model(cfg), task(16, 256, seed=7))
    assert time.perf_counter() - t0 < 1.0
    assert 2.5 < ce < 5.0  # ln 32 = 3.47
