"""Learning-rate rule: scaling with the global batch, warm-up, per-epoch annealing."""

from __future__ import annotations

import math

import pytest

from asrdist.train.schedule import LrSchedule, scaled_lr


def test_peak_scales_with_the_global_batch():
    assert scaled_lr(0.1, 256, 1024, "linear") == pytest.approx(0.4)
    assert scaled_lr(0.1, 256, 1024, "sqrt") == pytest.approx(0.2)
    assert scaled_lr(0.1, 256, 1024, "none") == pytest.approx(0.1)


def test_warmup_then_constant_then_anneal_by_sqrt2():
    s = LrSchedule(0.1, 256, 1024, "linear", warmup_steps=10, anneal_start=3,
                   anneal_factor=math.sqrt(2))
    ramp = [s.lr_at(k, 0) for k in range(10)]
    assert ramp[0] > 0.1 and ramp[-1] == pytest.approx(0.4)
    assert all(a < b for a, b in zip(ramp, ramp[1:], strict=False))
    assert s.lr_at(50, 1) == pytest.approx(0.4)  # epoch 2: peak
    assert s.lr_at(80, 2) == pytest.approx(0.4 / math.sqrt(2))  # epoch 3: first anneal
    assert s.lr_at(99, 4) == pytest.approx(0.4 / 2 / math.sqrt(2))


def test_no_warmup_ramp_when_the_batch_is_the_reference():
    s = LrSchedule(0.1, 256, 256, "linear", warmup_steps=10, anneal_start=9, anneal_factor=2)
    assert [s.lr_at(k, 0) for k in range(12)] == pytest.approx([0.1] * 12)
