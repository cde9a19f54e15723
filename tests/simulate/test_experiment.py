"""A simulated run's optimizer follows asrdist-train's learning-rate schedule, step by step."""

from __future__ import annotations

import math

import pytest
import torch

from asrdist.simulate.experiment import RunSpec, _optimizer
from asrdist.train.schedule import ScheduleOptions


def _rates(spec: RunSpec, per_epoch: int, steps: int) -> list[float]:
    model = torch.nn.Linear(2, 1)
    opt = _optimizer(spec, model, per_epoch, steps)
    out = []
    for _ in range(steps):
        model(torch.ones(1, 2)).sum().backward()
        opt.step()
        out.append(opt.param_groups[0]["lr"])
    return out


def test_each_learner_s_rate_is_the_schedule_s_at_its_own_step():
    """4 learners x 64 chunks = 256 = twice --lr-ref-batch 128: peak 0.2; warm-up over the
    first epoch (4 steps) from 0.1; the second epoch annealed once by sqrt 2 (anneal-start 2)."""
    schedule = ScheduleOptions(lr=0.1, lr_ref_batch=128, anneal_start=2)
    spec = RunSpec(algo="ssgd", learners=4, batch=64, lr=0.1, momentum=0.0, schedule=schedule)
    peak = 0.2
    want = [0.125, 0.15, 0.175, 0.2] + [peak / math.sqrt(2)] * 4 + [peak / 2] * 2
    assert _rates(spec, per_epoch=4, steps=10) == pytest.approx(want)


def test_without_a_schedule_the_rate_is_constant():
    spec = RunSpec(algo="ssgd", learners=4, batch=64, lr=0.3, momentum=0.9)
    assert _rates(spec, per_epoch=4, steps=6) == [0.3] * 6
