"""Alignment archives (ali.N.gz): Kaldi's exact bytes, round trip, and clear errors."""

from __future__ import annotations

import gzip
import io
import struct

import kaldiio
import numpy as np
import pytest

from asrdist.errors import AsrdistError
from asrdist.kaldi.alignments import (
    iter_int32_ark,
    parse_int32_ark,
    read_alignments,
    write_alignments,
    write_int32_ark,
)

ALIS = [
    ("spk1-utt1", np.array([2, 2, 3, 7, 7, 7], dtype=np.int32)),
    ("spk1-utt2", np.array([], dtype=np.int32)),
    ("spk2-utt1", np.arange(1000, dtype=np.int64)),
]


def test_bytes_are_kaldis_binary_int32_vector_layout(tmp_path):
    path = tmp_path / "ali.1.gz"
    write_alignments(path, [("u1", np.array([5, -1]))])
    expected = b"u1 \0B" + b"\x04" + struct.pack("<i", 2) + b"\x04" + struct.pack("<i", 5)
    expected += b"\x04" + struct.pack("<i", -1)
    assert gzip.decompress(path.read_bytes()) == expected


def test_round_trip_and_kaldiio_agrees(tmp_path):
    path = tmp_path / "ali.1.gz"
    write_alignments(path, ALIS)
    got = list(read_alignments(path))
    assert [k for k, _ in got] == [k for k, _ in ALIS]
    for (_, a), (_, b) in zip(got, ALIS, strict=True):
        assert a.dtype == np.int32
        np.testing.assert_array_equal(a, b)
    via_kaldiio = dict(kaldiio.load_ark(io.BytesIO(gzip.decompress(path.read_bytes()))))
    np.testing.assert_array_equal(via_kaldiio["spk2-utt1"], ALIS[2][1])


def test_reads_text_archive_entries(tmp_path):
    path = tmp_path / "ali.txt"
    path.write_bytes(b"u1 1 2 3 \nu2 4\n")
    got = dict(read_alignments(path))
    np.testing.assert_array_equal(got["u1"], [1, 2, 3])
    np.testing.assert_array_equal(got["u2"], [4])


def test_truncated_gzip_names_the_file(tmp_path):
    path = tmp_path / "ali.3.gz"
    write_alignments(path, ALIS)
    path.write_bytes(path.read_bytes()[:-30])
    with pytest.raises(AsrdistError, match=r"ali\.3\.gz: truncated or corrupt gzip"):
        list(read_alignments(path))


def test_corrupt_gzip_names_the_file(tmp_path):
    path = tmp_path / "ali.2.gz"
    path.write_bytes(b"this is not gzip at all")
    with pytest.raises(AsrdistError, match=r"ali\.2\.gz: truncated or corrupt gzip"):
        list(read_alignments(path))


def test_cut_archive_entry_names_file_and_utterance(tmp_path):
    path = tmp_path / "ali.4.gz"
    raw = b"u1 \0B\x04" + struct.pack("<i", 3) + b"\x04" + struct.pack("<i", 9)
    path.write_bytes(gzip.compress(raw))
    with pytest.raises(AsrdistError, match=r"ali\.4\.gz: utterance u1: truncated"):
        list(read_alignments(path))


def test_failed_write_leaves_no_file(tmp_path):
    path = tmp_path / "ali.1.gz"
    with pytest.raises(ValueError, match="invalid archive key"):
        write_alignments(path, [("ok", np.array([1])), ("bad key", np.array([2]))])
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("block", [1, 7, 1 << 20])
def test_streamed_reading_in_any_block_size_equals_whole_reading(block):
    buf = io.BytesIO()
    write_int32_ark(buf, ALIS)
    data = buf.getvalue() + b"u-text 4 5 6\nu-last 7\n"
    whole = list(parse_int32_ark(data, "x"))
    streamed = list(iter_int32_ark(io.BytesIO(data).read, "x", block=block))
    assert [k for k, _ in streamed] == [k for k, _ in whole] == [
        "spk1-utt1", "spk1-utt2", "spk2-utt1", "u-text", "u-last"]
    for (_, a), (_, b) in zip(streamed, whole, strict=True):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("cut", [1, 4, 9, 14])
def test_streamed_reading_of_a_cut_entry_names_it(cut):
    buf = io.BytesIO()
    write_int32_ark(buf, ALIS[:1])
    data = buf.getvalue()[:-cut]
    with pytest.raises(AsrdistError, match=r"^x: (utterance spk1-utt1: )?truncated"):
        list(iter_int32_ark(io.BytesIO(data).read, "x", block=3))


def test_gzip_archive_is_read_as_it_goes(tmp_path):
    """Entries come before the end of the file is read: a cut at the end of a large archive
    shows after its first entries, not before (the whole archive is never in memory)."""
    path = tmp_path / "ali.1.gz"
    many = [(f"u{n:05d}", np.arange(500, dtype=np.int32)) for n in range(2000)]
    write_alignments(path, many)
    path.write_bytes(path.read_bytes()[:-30])
    entries = read_alignments(path)
    first, values = next(entries)
    assert first == "u00000"
    np.testing.assert_array_equal(values, many[0][1])
    with pytest.raises(AsrdistError, match=r"ali\.1\.gz: truncated or corrupt gzip"):
        list(entries)
