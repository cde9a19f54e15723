"""Kaldi's CompactLattice archives (``lat.N.gz``), text and binary, as Kaldi's tools read them.

Text (``ark,t``; kaldi-lattice.cc's WriteCompactLattice through OpenFst's FstPrinter): the key
and a space, a newline, then per state (the start state first, then the others in order) its
arcs ``src<TAB>dst<TAB>word<TAB>w1,w2,t1_t2_...`` and its final weight ``state<TAB>w1,w2,...``;
a weight equal to One (0,0 and no transition-ids) is left out; numbers as C++'s ``<<`` prints
floats (6 significant digits); an empty line ends the lattice.

Binary (what latgen-faster-mapped writes into ``gzip -c``): the key and a space (no ``\\0B``:
the reader knows a binary FST by OpenFst's magic), then OpenFst's VectorFst layout with arc type
``compactlattice44``: the FstHeader (magic, "vector", arc type, version 2, flags 0, properties
(uint64), start, #states and #arcs (int64; #arcs is 0, as OpenFst writes to a stream it cannot
seek back in), then per state its final weight, its arc count (int64) and its arcs (ilabel,
olabel, weight, next state; int32 labels and states); a weight is two float32 and an
int32-counted int32 string. The properties are those Kaldi's determinized lattices carry, all
true of any determinized lattice: expanded, mutable, acceptor, no epsilons, and weighted (or
unweighted when every weight is One).
"""

from __future__ import annotations

import gzip
import io
import math
import struct
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import BinaryIO

import numpy as np

from asrdist.decode.lattice import CompactLattice, Weight
from asrdist.decode.lattice.native import FlatLattice
from asrdist.errors import AsrdistError

_FST_MAGIC = 2125659606
_ARC_TYPE = "compactlattice44"
# kExpanded | kMutable | kAcceptor | kNoEpsilons | kNoIEpsilons | kNoOEpsilons
_PROPERTIES = 0x3 | 0x10000 | 0x800000 | 0x2000000 | 0x8000000
_WEIGHTED, _UNWEIGHTED = 0x100000000, 0x200000000
_F0 = np.float32(0.0)


def _num(x: np.float32) -> str:
    if math.isinf(x):
        return "Infinity" if x > 0 else "-Infinity"
    if x != x:
        return "BadNumber"
    return f"{float(x):g}"


def _weight_text(w: Weight, string: tuple[int, ...]) -> str:
    return f"{_num(w[0])},{_num(w[1])}," + "_".join(map(str, string))


def _is_one(w: Weight, string: tuple[int, ...]) -> bool:
    return w[0] == 0 and w[1] == 0 and not string


def compact_lattice_text(key: str, clat: CompactLattice) -> str:
    """One archive entry in Kaldi's text form."""
    lines = [f"{key} \n"]
    order = [clat.start] + [s for s in range(clat.num_states) if s != clat.start]
    for s in order if clat.num_states else []:
        for word, w, string, nxt in clat.arcs[s]:
            weight = "" if _is_one(w, string) else "\t" + _weight_text(w, string)
            lines.append(f"{s}\t{nxt}\t{word}{weight}\n")
        final = clat.final[s]
        if final is not None or not clat.arcs[s]:
            w, string = final if final is not None else ((np.inf, np.inf), ())
            lines.append(f"{s}\n" if _is_one(w, string) else f"{s}\t{_weight_text(w, string)}\n")
    lines.append("\n")
    return "".join(lines)


def _weight_bytes(w: Weight, string: tuple[int, ...]) -> bytes:
    return struct.pack(f"<ffi{len(string)}i", float(w[0]), float(w[1]), len(string), *string)


def compact_lattice_binary(key: str, clat: CompactLattice | FlatLattice) -> bytes:
    """One archive entry in Kaldi's binary form (a :class:`FlatLattice` written by the
    compiled module, to the same bytes)."""
    if isinstance(clat, FlatLattice):
        return key.encode() + b" " + clat.fst_bytes()

    def string(s: str) -> bytes:
        return struct.pack("<i", len(s)) + s.encode()

    weighted = any(not _is_one(a[1], a[2]) for arcs in clat.arcs for a in arcs) or any(
        f is not None and not _is_one(*f) for f in clat.final)
    properties = _PROPERTIES | (_WEIGHTED if weighted else _UNWEIGHTED)
    start = clat.start if clat.num_states else -1
    out = [key.encode() + b" ", struct.pack("<i", _FST_MAGIC), string("vector"),
           string(_ARC_TYPE), struct.pack("<iiQqqq", 2, 0, properties, start,
                                          clat.num_states, 0)]
    zero = (np.float32(np.inf), np.float32(np.inf))
    for s in range(clat.num_states):
        final = clat.final[s]
        out.append(_weight_bytes(*(final if final is not None else (zero, ()))))
        out.append(struct.pack("<q", len(clat.arcs[s])))
        for word, w, tids, nxt in clat.arcs[s]:
            out.append(struct.pack("<ii", word, word) + _weight_bytes(w, tids)
                       + struct.pack("<i", nxt))
    return b"".join(out)


def write_lattices(path: Path, lattices: Iterable[tuple[str, CompactLattice]],
                   binary: bool = True) -> None:
    """A ``lat.N.gz`` archive (gzipped, as decode.sh writes it)."""
    with gzip.open(path, "wb") as f:
        for key, clat in lattices:
            f.write(compact_lattice_binary(key, clat) if binary
                    else compact_lattice_text(key, clat).encode())


def iter_lattices_binary(data: bytes) -> Iterator[tuple[str, CompactLattice]]:
    """A binary archive of compact lattices as :func:`compact_lattice_binary` and Kaldi write
    them (gunzipped), one (key, lattice) at a time: a reader keeps only the one it reads."""
    yield from iter_lattices_stream(io.BytesIO(data))


def iter_lattices_stream(f: BinaryIO,
                         block: int = 1 << 20) -> Iterator[tuple[str, CompactLattice]]:
    """:func:`iter_lattices_binary` of a binary file (a ``gzip.open`` archive) read ``block``
    bytes at a time: a reader holds a block and the lattice it parses, not the archive. An
    archive that ends inside a lattice is a ValueError."""
    buf, pos, key = b"", 0, ""

    def fill(n: int) -> bool:
        """At least ``n`` bytes from ``pos`` on, read as needed; False at the archive's end."""
        nonlocal buf, pos
        while len(buf) - pos < n:
            more = f.read(max(block, n))
            if not more:
                return False
            buf, pos = buf[pos:] + more, 0
        return True

    def take(fmt: str) -> tuple:
        nonlocal pos
        size = struct.calcsize(fmt)
        if len(buf) - pos < size and not fill(size):
            raise ValueError(f"the archive ends inside lattice {key}")
        values = struct.unpack_from(fmt, buf, pos)
        pos += size
        return values

    def weight() -> tuple[Weight, tuple[int, ...]]:
        w1, w2, n = take("<ffi")
        return (np.float32(w1), np.float32(w2)), take(f"<{n}i")

    while fill(1):
        while (space := buf.find(b" ", pos)) < 0:
            if not fill(len(buf) - pos + 1):
                raise ValueError("the archive ends inside a key")
        key = buf[pos:space].decode()
        pos = space + 1
        magic, = take("<i")
        if magic != _FST_MAGIC:
            raise AsrdistError(f"lattice {key}: not an OpenFst binary FST (magic {magic})")
        for _ in range(2):
            n, = take("<i")
            take(f"{n}x")
        _version, _flags, _props, start, num_states, _num_arcs = take("<iiQqqq")
        clat = CompactLattice(start=max(start, 0))
        for _ in range(num_states):
            final = weight()
            clat.final.append(None if math.isinf(final[0][0]) else final)
            arcs = []
            for _ in range(take("<q")[0]):
                word, _olabel = take("<ii")
                w, tids = weight()
                arcs.append((word, w, tids, take("<i")[0]))
            clat.arcs.append(arcs)
        yield key, clat


def _parse_weight(text: str) -> tuple[Weight, tuple[int, ...]]:
    v1, v2, string = text.split(",")
    return ((np.float32(v1), np.float32(v2)),
            tuple(int(t) for t in string.split("_")) if string else ())


def iter_lattices_text(text: str) -> Iterator[tuple[str, CompactLattice]]:
    """A Kaldi text archive of compact lattices (``lattice-copy ark:... ark,t:-``), one
    (key, lattice) at a time."""
    for block in text.split("\n\n"):
        lines = block.strip("\n").split("\n")
        if not lines[0].strip():
            continue
        clat = CompactLattice()
        rows = [line.split("\t") for line in lines[1:]]
        num_states = 1 + max((int(f) for r in rows for f in r[:2 if len(r) > 2 else 1]),
                             default=-1)
        clat.arcs = [[] for _ in range(num_states)]
        clat.final = [None] * num_states
        for i, r in enumerate(rows):
            s = int(r[0])
            if i == 0:
                clat.start = s
            if len(r) >= 3:
                w, string = _parse_weight(r[3]) if len(r) > 3 else ((_F0, _F0), ())
                clat.arcs[s].append((int(r[2]), w, string, int(r[1])))
            else:
                clat.final[s] = _parse_weight(r[1]) if len(r) > 1 else ((_F0, _F0), ())
        yield lines[0].strip(), clat

