"""The spilled store: arrays come back equal, aligned and writable, a key put again is
replaced, nothing is ever named in its dir, and an unwritable dir is one line."""

from __future__ import annotations

import numpy as np
import pytest

from asrdist.errors import AsrdistError
from asrdist.train.spilled_arrays import SpilledArrays

DTYPES = [np.int32, np.float64, np.int64]


def _arrays(rng: np.random.Generator, n: int) -> list[np.ndarray]:
    return [rng.integers(-9, 9, n).astype(np.int32), rng.normal(size=n + 1),
            np.arange(2 * n, dtype=np.int64)]


def test_every_key_reads_back_its_arrays_and_ints(tmp_path):
    rng = np.random.default_rng(0)
    store = SpilledArrays(DTYPES, scalars=2, spill_dir=tmp_path)
    put = {f"u{n}": (_arrays(rng, n), [n, -n]) for n in (0, 1, 3, 7, 100)}
    for key, (arrays, ints) in put.items():
        store.put(key, arrays, ints)
    assert len(store) == len(put) and "u3" in store and "u4" not in store
    for key in reversed(list(put)):  # any order
        arrays, ints = store.get(key)
        assert ints == put[key][1]
        for got, want in zip(arrays, put[key][0], strict=True):
            assert got.dtype == want.dtype and got.flags.aligned and got.flags.writeable
            np.testing.assert_array_equal(got, want)
    assert list(tmp_path.iterdir()) == []


def test_a_key_put_again_is_replaced(tmp_path):
    rng = np.random.default_rng(1)
    store = SpilledArrays(DTYPES, spill_dir=tmp_path)
    first, second = _arrays(rng, 5), _arrays(rng, 9)
    store.put("a", first)
    store.put("b", first)
    store.put("a", second)
    assert len(store) == 2
    np.testing.assert_array_equal(store.get("a")[0][2], second[2])
    np.testing.assert_array_equal(store.get("b")[0][1], first[1])


def test_a_narrowing_cast_is_refused(tmp_path):
    store = SpilledArrays([np.int32], spill_dir=tmp_path)
    with pytest.raises(TypeError):
        store.put("a", [np.arange(3, dtype=np.int64)])


def test_a_missing_dir_is_one_line(tmp_path):
    with pytest.raises(AsrdistError, match=r"cannot make a spill file in \S+/gone \(No such "
                                           r"file or directory\): set TMPDIR"):
        SpilledArrays(DTYPES, spill_dir=tmp_path / "gone")
