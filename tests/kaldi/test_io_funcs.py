"""Kaldi primitive serialisation: exact bytes, text form, round trips and clear errors."""

from __future__ import annotations

import struct

import numpy as np
import pytest

from asrdist.errors import AsrdistError
from asrdist.kaldi.io_funcs import KaldiReader, KaldiWriter, format_float


def test_binary_primitives_bytes():
    w = KaldiWriter(binary=True)
    w.write_token("<Tok>")
    w.write_int32(-3)
    w.write_float(0.5)
    w.write_int_vector([1, 2])
    w.write_float_vector([1.0, 2.0])
    w.write_float_matrix(np.array([[1.0, 2.0]]))
    assert w.getvalue() == (
        b"\0B<Tok> \x04"
        + struct.pack("<i", -3)
        + b"\x04"
        + struct.pack("<f", 0.5)
        + b"\x04"
        + struct.pack("<iii", 2, 1, 2)
        + b"FV \x04"
        + struct.pack("<i", 2)
        + struct.pack("<ff", 1, 2)
        + b"FM \x04"
        + struct.pack("<i", 1)
        + b"\x04"
        + struct.pack("<i", 2)
        + struct.pack("<ff", 1, 2)
    )


def test_text_primitives_match_kaldi_text_write():
    w = KaldiWriter(binary=False)
    w.write_token("<Tok>")
    w.write_int32(7)
    w.write_float(1 / 3)
    w.text_newline()
    w.write_float_vector([0.0, -1.5])
    w.write_float_matrix(np.array([[1.0, 2.0], [3.0, 4.0]]))
    w.write_float_vector([])
    assert w.getvalue() == (b"<Tok> 7 0.3333333 \n [ 0 -1.5 ]\n [\n  1 2 \n  3 4 ]\n [ ]\n")


@pytest.mark.parametrize("binary", [True, False])
def test_round_trip(binary):
    rng = np.random.default_rng(0)
    mat = rng.normal(size=(3, 5)).astype(np.float32)
    vec = rng.normal(size=7).astype(np.float32)
    w = KaldiWriter(binary)
    w.write_token("<A>")
    w.write_int32(123456)
    w.write_float(-2.25)
    w.write_int_vector([4, -1, 9])
    w.write_float_vector(vec)
    w.write_float_matrix(mat)
    w.write_float_vector([])
    r = KaldiReader(w.getvalue(), "x")
    assert r.binary == binary
    assert r.peek_token() == "<A>"
    r.expect_token("<A>")
    assert r.read_int32() == 123456
    assert r.read_float() == -2.25
    assert r.read_int_vector().tolist() == [4, -1, 9]
    np.testing.assert_allclose(r.read_float_vector(), vec, rtol=0 if binary else 1e-6)
    np.testing.assert_allclose(r.read_float_matrix(), mat, rtol=0 if binary else 1e-6)
    assert r.read_float_vector().size == 0
    assert r.at_end()


def test_reads_double_vectors_and_matrices():
    w = KaldiWriter(binary=True)
    w.write_float_vector([1.0, 2.0], double=True)
    w.write_float_matrix(np.eye(2), double=True)
    r = KaldiReader(w.getvalue(), "x")
    assert r.read_float_vector().dtype == np.float64
    np.testing.assert_array_equal(r.read_float_matrix(), np.eye(2))


def test_errors_name_the_file_and_offset():
    r = KaldiReader(b"\0B<A> \x04\x01\x00", "model.mdl")
    with pytest.raises(AsrdistError, match=r"model\.mdl: expected token <B>, got <A>"):
        r.expect_token("<B>")
    r = KaldiReader(b"\0B\x04\x01\x00", "model.mdl")
    with pytest.raises(AsrdistError, match=r"model\.mdl: unexpected end of file .*at byte 3"):
        r.read_int32()
    with pytest.raises(AsrdistError, match=r"t\.txt: expected an integer, got b'x'"):
        KaldiReader(b"x", "t.txt").read_int32()


def test_float_format_is_cpp_precision_7():
    assert [format_float(v) for v in (0.0, 1e-5, 123456789.0, -0.2876821)] == [
        "0",
        "1e-05",
        "1.234568e+08",
        "-0.2876821",
    ]
