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


def test_kaldi_schedule_is_learners_times_an_exponential_decay():
    from asrdist.train.schedule import KaldiSchedule

    s = KaldiSchedule(0.02, 0.002, learners=4, total_steps=100)
    assert s.peak == pytest.approx(0.08)
    assert s.lr_at(0, 0) == pytest.approx(0.08)
    assert s.lr_at(50, 3) == pytest.approx(0.08 * math.sqrt(0.1))
    assert s.lr_at(100, 9) == pytest.approx(0.008)
    rates = [s.lr_at(k, 0) for k in range(101)]
    ratios = [b / a for a, b in zip(rates, rates[1:], strict=False)]
    assert max(ratios) == pytest.approx(min(ratios))  # a constant factor per step


def test_make_schedule_follows_the_option():
    from asrdist.train.schedule import KaldiSchedule, ScheduleOptions, make_schedule

    kaldi = make_schedule(ScheduleOptions(lr=0.02, lr_schedule="kaldi", lr_final=0.002), 256,
                          [20, 20], 2, max_steps=30)
    assert isinstance(kaldi, KaldiSchedule) and kaldi.total_steps == 30
    assert kaldi.lr_at(30, 1) == pytest.approx(2 * 0.002)
    ibm = make_schedule(ScheduleOptions(lr=0.02), 256, [20, 20], 2)
    assert isinstance(ibm, LrSchedule)
