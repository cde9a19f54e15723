"""Arrays by key in an unlinked temporary file instead of the process's memory: sequence
training reads every utterance's lattice and numerator once at the start and then one
utterance at a time, and held in memory they grow with the corpus (a few times the lat.N.gz
files per learner: Switchboard's would not fit beside the model).

The file is :func:`tempfile.TemporaryFile`'s, in the system temp dir (``TMPDIR``, else /tmp):
on Linux an ``O_TMPFILE`` inode that never has a name, elsewhere a name created with
``O_EXCL | O_NOFOLLOW`` (a file or symlink planted there is refused, never opened) and
unlinked at once, so nothing is left behind, not even by ``kill -9``. The temp dir and not the
run's ``--out``: it is the node's own scratch disk, read without a network every step, and
learners sharing an ``--out`` on NFS would leave ``.nfs*`` files there. It costs the arrays'
size on that disk; a tmpfs TMPDIR puts them back in memory (shared, outside the RSS).

Reads are ``os.preadv`` at an offset (no shared file position), so threads and forked
processes can read one store at once.
"""

from __future__ import annotations

import os
import tempfile
from array import array
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt

from asrdist.errors import AsrdistError

ALIGN = 8  # each array starts 8-byte aligned in the file and in the buffer read back


def _padded(nbytes: int) -> int:
    return -(-nbytes // ALIGN) * ALIGN


class SpilledArrays:
    """Per key, one array of each of ``dtypes`` and ``scalars`` ints. :meth:`put` appends the
    arrays to the file; memory keeps only the key's offset, lengths and scalars (8 bytes each),
    however long its arrays. A key put again is replaced."""

    def __init__(self, dtypes: Sequence[npt.DTypeLike], scalars: int = 0,
                 spill_dir: str | Path | None = None) -> None:
        self.dtypes = [np.dtype(d) for d in dtypes]
        self.scalars = scalars
        self._width = 1 + len(self.dtypes) + scalars
        self.dir = Path(spill_dir or tempfile.gettempdir())
        try:
            self._file = tempfile.TemporaryFile(dir=self.dir)
        except OSError as e:
            raise AsrdistError(f"cannot make a spill file in {self.dir} ({e.strerror}): set "
                               "TMPDIR to a writable disk") from e
        self._slots: dict[str, int] = {}
        self._index = array("q")  # per slot: offset, each array's length, the scalars
        self._end = 0

    def __contains__(self, key: str) -> bool:
        return key in self._slots

    def __len__(self) -> int:
        return len(self._slots)

    def put(self, key: str, arrays: Sequence[np.ndarray], scalars: Sequence[int] = ()) -> None:
        parts = [np.ascontiguousarray(a).astype(d, casting="safe", copy=False)
                 for a, d in zip(arrays, self.dtypes, strict=True)]
        if len(scalars) != self.scalars:
            raise ValueError(f"{len(scalars)} scalars, not {self.scalars}")
        record = b"".join(p.tobytes() + bytes(_padded(p.nbytes) - p.nbytes) for p in parts)
        try:
            self._file.write(record)
            self._file.flush()  # through to the file: get() reads it with preadv
        except OSError as e:
            raise AsrdistError(f"cannot write the spill file in {self.dir} "
                               f"({e.strerror}): set TMPDIR to a disk with room") from e
        row = array("q", [self._end, *(p.size for p in parts), *map(int, scalars)])
        self._end += len(record)
        slot = self._slots.setdefault(key, len(self._slots))
        if slot * self._width == len(self._index):
            self._index.extend(row)
        else:
            self._index[slot * self._width:(slot + 1) * self._width] = row

    def get(self, key: str) -> tuple[list[np.ndarray], list[int]]:
        """``key``'s arrays (views of one buffer read back) and scalars."""
        slot = self._slots[key]
        offset, *rest = self._index[slot * self._width:(slot + 1) * self._width]
        lengths, scalars = rest[:len(self.dtypes)], rest[len(self.dtypes):]
        sizes = [_padded(n * d.itemsize) for n, d in zip(lengths, self.dtypes, strict=True)]
        buf = np.empty(sum(sizes), dtype=np.uint8)
        if os.preadv(self._file.fileno(), [buf], offset) != buf.nbytes:
            raise AsrdistError(f"the spill file of {key} is short (truncated by another "
                               "process?)")
        arrays, pos = [], 0
        for n, d, size in zip(lengths, self.dtypes, sizes, strict=True):
            arrays.append(buf[pos:pos + n * d.itemsize].view(d))
            pos += size
        return arrays, scalars
