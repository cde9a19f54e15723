"""Binary lattice archives read a block at a time: Kaldi's lattices (tests/decode/kaldi_post)
come out as the whole-archive reader gives them, for any block size, and an archive cut short
is a ValueError, not a shorter list."""

from __future__ import annotations

import gzip
import io
from pathlib import Path

import pytest

from asrdist.decode.lattice_io import iter_lattices_binary, iter_lattices_stream
from asrdist.testing.lattices import lattice_bits

KALDI = Path(__file__).parent / "kaldi_post" / "lat.1.gz"


def _data() -> bytes:
    with gzip.open(KALDI, "rb") as f:
        return f.read()


@pytest.mark.parametrize("block", [1, 7, 4096, 1 << 20])
def test_any_block_size_reads_the_archives_lattices(block):
    whole = [(k, lattice_bits(c)) for k, c in iter_lattices_binary(_data())]
    with gzip.open(KALDI, "rb") as f:
        streamed = [(k, lattice_bits(c)) for k, c in iter_lattices_stream(f, block)]
    assert len(whole) == 3 and streamed == whole


def test_an_archive_cut_short_is_a_value_error():
    data = _data()
    first = data.index(b" ")
    for cut, message in [(len(data) - 3, "ends inside lattice lucas-7-020"),
                         (first - 2, "ends inside a key")]:
        with pytest.raises(ValueError, match=message):
            list(iter_lattices_stream(io.BytesIO(data[:cut]), 16))
