"""Kaldi archives of int32 vectors: alignments (``ali.N.gz``) and per-frame pdf targets.

An entry is ``<key> \\0B`` then the vector as Kaldi's BasicVectorHolder<int32> writes it: the
byte 4 and the int32 length, then the byte 4 and the int32 value for each element. Archives
written here are byte-identical to Kaldi's (``ali-to-pdf ... ark:-`` / ``gzip -c``), and the
reader also accepts text entries (``<key> 1 2 3``) as ``ark,t:`` writes them.
"""

from __future__ import annotations

import contextlib
import gzip
import os
import struct
import zlib
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

import numpy as np

from asrdist.errors import AsrdistError
from asrdist.fsutil import atomic_write

# Each element is the size byte 4 then a little-endian int32: 5 bytes, unaligned.
_ELEMENT = np.dtype([("size", "u1"), ("value", "<i4")])


def encode_int32_vector(values: np.ndarray) -> bytes:
    """The binary holder bytes of one int32 vector (after ``key \\0B``)."""
    arr = np.asarray(values)
    if arr.ndim != 1:
        raise ValueError(f"expected a 1-D vector, got shape {arr.shape}")
    if arr.size and (arr.min() < -(2**31) or arr.max() >= 2**31):
        raise ValueError("values do not fit int32")
    elems = np.empty(arr.size, dtype=_ELEMENT)
    elems["size"] = 4
    elems["value"] = arr
    return b"\x04" + struct.pack("<i", arr.size) + elems.tobytes()


def _check_key(key: str) -> bytes:
    raw = key.encode("utf-8")
    if raw.split() != [raw]:  # empty, or ASCII whitespace in it
        raise ValueError(f"invalid archive key {key!r}: must be non-empty without whitespace")
    return raw


def write_int32_ark(f, entries: Iterable[tuple[str, np.ndarray]]) -> list[tuple[str, int]]:
    """Write entries to the open binary file ``f``; return (key, offset of ``\\0B``) for scp."""
    offsets = []
    pos = f.tell()
    for key, values in entries:
        head = _check_key(key) + b" "
        body = b"\0B" + encode_int32_vector(values)
        f.write(head + body)
        offsets.append((key, pos + len(head)))
        pos += len(head) + len(body)
    return offsets


def write_alignments(path: str | os.PathLike, alis: Iterable[tuple[str, np.ndarray]]) -> None:
    """Write a gzip'd Kaldi binary archive of int32 vectors (``ali.N.gz``), atomically."""
    with atomic_write(path, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as gz:
        write_int32_ark(gz, alis)


def parse_int32_ark(data: bytes, name: str) -> Iterator[tuple[str, np.ndarray]]:
    """Parse an uncompressed archive of int32 vectors (binary or text entries).

    Raises AsrdistError naming ``name`` and the utterance when an entry is cut or malformed.
    """
    pos = 0
    while (entry := _parse_entry(data, pos, name, final=True)) is not None:
        pos, key, values = entry
        yield key, values


def iter_int32_ark(
    read: Callable[[int], bytes], name: str, block: int = 1 << 20
) -> Iterator[tuple[str, np.ndarray]]:
    """Parse an archive read ``block`` bytes at a time through ``read`` (a file's read): the
    memory it takes is one block and one entry, whatever the archive's size."""
    data, pos, final = b"", 0, False
    while True:
        entry = _parse_entry(data, pos, name, final)
        if entry is not None:
            pos, key, values = entry
            yield key, values
        elif final:
            return
        else:
            more = read(block)
            data, pos, final = data[pos:] + more, 0, not more


def _parse_entry(
    data: bytes, pos: int, name: str, final: bool
) -> tuple[int, str, np.ndarray] | None:
    """The entry at ``pos``: (end, key, values); None at the end of ``data`` or, unless
    ``final`` (nothing follows ``data``), when the entry is not all in it yet."""
    n = len(data)
    while pos < n and data[pos] in b" \t\n\r":
        pos += 1
    if pos >= n:
        return None
    space = data.find(b" ", pos)
    if space < 0 and not final and data.find(b"\n", pos) < 0:
        return None
    if space < 0 or data.find(b"\n", pos, space) >= 0:
        raise AsrdistError(f"{name}: truncated or corrupt archive: key without data at byte {pos}")
    key = data[pos:space].decode("utf-8", errors="replace")
    pos = space + 1
    if n - pos < 2 and not final:
        return None
    if data.startswith(b"\0B", pos):
        return _parse_binary_vector(data, pos + 2, name, key, final)
    end = data.find(b"\n", pos)
    if end < 0 and not final:
        return None
    end = n if end < 0 else end
    try:
        values = np.asarray([int(w) for w in data[pos:end].split()], dtype=np.int32)
    except ValueError:
        raise AsrdistError(
            f"{name}: utterance {key}: not an int32 vector (corrupt archive?)"
        ) from None
    return end + 1, key, values


def _parse_binary_vector(
    data: bytes, pos: int, name: str, key: str, final: bool
) -> tuple[int, str, np.ndarray] | None:
    if pos + 5 > len(data) and not final:
        return None
    if pos + 5 > len(data) or data[pos] != 4:
        raise AsrdistError(f"{name}: utterance {key}: truncated or not an int32 vector")
    (count,) = struct.unpack_from("<i", data, pos + 1)
    pos += 5
    end = pos + 5 * count
    if count >= 0 and end > len(data) and not final:
        return None
    if count < 0 or end > len(data):
        raise AsrdistError(
            f"{name}: utterance {key}: truncated archive (vector of {count} elements cut short)"
        )
    values = decode_int32_elements(data, count, pos)
    if values is None:
        raise AsrdistError(f"{name}: utterance {key}: corrupt int32 vector (bad size markers)")
    return end, key, values.astype(np.int32)


def decode_int32_elements(data: bytes, count: int, offset: int = 0) -> np.ndarray | None:
    """The values of ``count`` holder elements (byte 4, int32) at ``offset`` in ``data``, which
    must hold them all; None when a size byte is not 4 (not an int32 vector)."""
    elems = np.frombuffer(data, dtype=_ELEMENT, count=count, offset=offset)
    if count and not (elems["size"] == 4).all():
        return None
    return elems["value"]


@contextlib.contextmanager
def open_gzip(path: str | os.PathLike) -> Iterator[Callable[[int], bytes]]:
    """A ``read(n)`` over the decompressed content, read as it is asked for; a missing,
    truncated or corrupt gzip is one AsrdistError naming the file, when it is met."""

    def read(n: int) -> bytes:
        try:
            return f.read(n)
        except (EOFError, OSError, zlib.error) as err:
            raise AsrdistError(f"{path}: truncated or corrupt gzip file ({err})") from None

    try:
        f = gzip.open(path, "rb")
    except FileNotFoundError:
        raise AsrdistError(f"{path}: alignment file not found") from None
    with f:
        yield read


def read_alignments(path: str | os.PathLike) -> Iterator[tuple[str, np.ndarray]]:
    """Iterate (utterance, int32 vector) over a Kaldi archive, gzip'd (``.gz``) or plain,
    reading it as it goes (an archive of any size takes one block of memory)."""
    path = Path(path)
    if path.suffix == ".gz":
        with open_gzip(path) as read:
            yield from iter_int32_ark(read, str(path))
        return
    try:
        f = open(path, "rb")
    except FileNotFoundError:
        raise AsrdistError(f"{path}: alignment file not found") from None
    with f:
        yield from iter_int32_ark(f.read, str(path))


def read_num_jobs(ali_dir: Path) -> int:
    """An alignment dir's num_jobs: how many ali.N.gz it holds."""
    path = ali_dir / "num_jobs"
    try:
        text = path.read_text().strip()
    except FileNotFoundError:
        raise AsrdistError(f"{path}: missing (not a Kaldi alignment dir?)") from None
    if not text.isdigit() or int(text) < 1:
        raise AsrdistError(f"{path}: expected a positive integer, got {text[:20]!r}")
    return int(text)


def alignment_files(ali_dir: Path) -> list[Path]:
    """``ali.1.gz`` .. ``ali.N.gz``; all missing ones are named in one error."""
    files = [ali_dir / f"ali.{job}.gz" for job in range(1, read_num_jobs(ali_dir) + 1)]
    missing = [f.name for f in files if not f.is_file()]
    if missing:
        raise AsrdistError(f"{ali_dir}: missing alignment files: {' '.join(missing)}")
    return files
