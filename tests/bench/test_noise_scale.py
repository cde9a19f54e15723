"""bench.noise_scale's choice of the records its table shows (the training is the benchmark's
job, not a test's)."""

from __future__ import annotations

from bench.noise_scale import nearest

RECORDS = [{"progress": p, "step": i} for i, p in enumerate([0.0, 0.1, 0.2, 0.5, 1.0])]


def test_nearest_record_to_an_epoch():
    assert nearest(RECORDS, 0.0)["step"] == 0
    assert nearest(RECORDS, 0.14)["step"] == 1
    assert nearest(RECORDS, 0.4)["step"] == 3
    assert nearest(RECORDS, 1.0)["step"] == 4


def test_no_record_past_the_end():
    assert nearest(RECORDS, 1.5) is None
    assert nearest([], 0.0) is None
