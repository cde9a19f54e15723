"""The fast pdf-target reader agrees with kaldiio on every kind of input."""

from __future__ import annotations

import kaldiio
import numpy as np
import pytest

from asrdist.data.targets import load_int32_vector


def test_same_vectors_as_kaldiio(tmp_path):
    rng = np.random.default_rng(0)
    vectors = {f"u{i}": rng.integers(0, 3000, int(rng.integers(0, 50))).astype(np.int32)
               for i in range(6)}
    with kaldiio.WriteHelper(f"ark,scp:{tmp_path / 'p.ark'},{tmp_path / 'p.scp'}") as w:
        for k, v in vectors.items():
            w(k, v)
    fds: dict = {}
    for line in (tmp_path / "p.scp").read_text().splitlines():
        utt, rx = line.split()
        got = load_int32_vector(rx, fds)
        assert got.dtype == np.int64
        np.testing.assert_array_equal(got, vectors[utt])
    assert len(fds) == 1  # one open file for the whole ark


def test_other_formats_go_through_kaldiio(tmp_path):
    with kaldiio.WriteHelper(f"ark,scp,t:{tmp_path / 't.ark'},{tmp_path / 't.scp'}") as w:
        w("u", np.array([4, 5, 6], dtype=np.int32))
    rx = (tmp_path / "t.scp").read_text().split()[1]
    np.testing.assert_array_equal(load_int32_vector(rx, {}), [4, 5, 6])


def test_truncated_vector_is_an_error(tmp_path):
    with kaldiio.WriteHelper(f"ark,scp:{tmp_path / 'p.ark'},{tmp_path / 'p.scp'}") as w:
        w("u", np.arange(10, dtype=np.int32))
    data = (tmp_path / "p.ark").read_bytes()
    (tmp_path / "p.ark").write_bytes(data[:-7])
    rx = (tmp_path / "p.scp").read_text().split()[1]
    with pytest.raises(ValueError, match="not a Kaldi int32 vector of 10 elements"):
        load_int32_vector(rx, {})
