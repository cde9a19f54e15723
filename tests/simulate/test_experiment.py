"""A simulated run's optimizer is built as asrdist-train's (from the optimizer's options) and
follows its learning-rate schedule, step by step."""

from __future__ import annotations

import math

import pytest
import torch

from asrdist.data.options import DataOptions
from asrdist.errors import AsrdistError
from asrdist.optim.build import OptimizerOptions
from asrdist.simulate.experiment import RunSpec, _optimizer
from asrdist.train.schedule import ScheduleOptions, constant_rate


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
    spec = RunSpec(algo="ssgd", learners=4, reading=DataOptions(batch_size=64),
                   optim=OptimizerOptions(momentum=0.0), schedule=schedule)
    peak = 0.2
    want = [0.125, 0.15, 0.175, 0.2] + [peak / math.sqrt(2)] * 4 + [peak / 2] * 2
    assert _rates(spec, per_epoch=4, steps=10) == pytest.approx(want)


def test_a_constant_rate_is_the_same_at_every_step():
    spec = RunSpec(algo="ssgd", learners=4, reading=DataOptions(batch_size=64),
                   schedule=constant_rate(0.3))
    assert _rates(spec, per_epoch=4, steps=6) == [0.3] * 6


def test_the_optimizer_s_options_reach_the_simulated_learner_s_sgd():
    spec = RunSpec(algo="ssgd", optim=OptimizerOptions(momentum=0.5, nesterov=True,
                                                       weight_decay=0.01))
    group = _optimizer(spec, torch.nn.Linear(2, 1), 4, 4).param_groups[0]
    assert (group["momentum"], group["nesterov"], group["weight_decay"]) == (0.5, True, 0.01)


def test_a_spec_of_another_optimizer_than_sgd_is_refused():
    with pytest.raises(AsrdistError, match="--optimizer ngsgd: the simulator runs sgd"):
        RunSpec(algo="ssgd", optim=OptimizerOptions(optimizer="ngsgd"))


def test_replace_takes_a_component_s_option_by_its_flag_s_name():
    spec = RunSpec(algo="ssgd").replace(batch_size=8, lr=0.3, momentum=0.0, learners=2)
    assert (spec.batch, spec.schedule.lr, spec.optim.momentum, spec.learners) == (8, 0.3, 0.0, 2)
    assert spec.schedule.lr_schedule == "ibm" and spec.reading.chunk_len == 21
    with pytest.raises(TypeError, match="no option 'batch'"):
        spec.replace(batch=8)
    with pytest.raises(TypeError, match="RunSpec.model is a ModelConfig"):
        spec.replace(model="dnn")
