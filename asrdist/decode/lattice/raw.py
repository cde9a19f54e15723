"""Raw state-level lattices as Python objects: read from OpenFst's binary layout (the compiled
search's bytes, or kaldi-decoder's kaldifst.Lattice written to memory), and kaldi-decoder's
acoustic costs rounded as LatticeFasterDecoder's cost offsets round them; and the pause of
Python's cyclic collector that the Python determinizers run under.
"""

from __future__ import annotations

import contextlib
import gc
import itertools
import os
import struct
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from asrdist.decode.lattice.fst import Lattice
from asrdist.decode.lattice.weights import F32, Weight
from asrdist.errors import AsrdistError

if TYPE_CHECKING:
    import kaldifst

@contextlib.contextmanager
def no_cyclic_gc() -> Iterator[None]:
    """Python's cyclic garbage collector paused: a lattice's conversion and determinization
    make hundreds of thousands of tuples, none in a cycle, and the collections they trigger
    (each walking every live object of the job) cost a tenth to a half of the determinizer's
    time. Reference counting still frees everything; the collector's state is restored."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def with_cost_offsets(lat: Lattice) -> Lattice:
    """The acoustic costs as LatticeFasterDecoder stores them, rounded through its per-frame
    cost offsets: ``(offset + cost) - offset`` in float32, the offset being minus the frame's
    best token cost (those costs themselves kept relative to the offsets). This moves costs by
    an ulp or so; without it a lattice differs from latgen-faster-mapped's in the last bits.
    The frame's best token is looked for among the lattice's states (the search's best
    token at a frame survives lattice pruning unless all its continuations were pruned).
    """
    n = len(lat.arcs)
    frame = [-1] * n
    frame[lat.start] = 0
    by_frame: list[list[int]] = [[lat.start]]
    for f in itertools.count():  # states per frame, in order (emitting arcs go one frame on)
        if f >= len(by_frame):
            break
        i = 0
        while i < len(by_frame[f]):
            s = by_frame[f][i]
            i += 1
            for ilabel, _o, _w, nxt in lat.arcs[s]:
                if frame[nxt] < 0:
                    frame[nxt] = f + (ilabel != 0)
                    if frame[nxt] == len(by_frame):
                        by_frame.append([])
                    by_frame[frame[nxt]].append(nxt)
    tot = [F32(np.inf)] * n
    tot[lat.start] = F32(0.0)
    arcs = [list(a) for a in lat.arcs]
    for states in by_frame:
        changed = True
        while changed:  # non-emitting arcs within the frame: tot = cur + graph
            changed = False
            for s in states:
                for ilabel, _o, w, nxt in arcs[s]:
                    if ilabel == 0 and tot[s] + w[0] < tot[nxt]:
                        tot[nxt], changed = tot[s] + w[0], True
        offset = -min(tot[s] for s in states)
        for s in states:
            for i, (ilabel, olabel, w, nxt) in enumerate(arcs[s]):
                if ilabel == 0:
                    continue
                ac = offset + w[1]  # cost_offset - LogLikelihood
                cand = (tot[s] + ac) + w[0]
                if cand < tot[nxt]:
                    tot[nxt] = cand
                arcs[s][i] = (ilabel, olabel, (w[0], ac - offset), nxt)
    return Lattice(arcs, lat.final, lat.start)


_FST_ARC = np.dtype([("i", "<i4"), ("o", "<i4"), ("w1", "<f4"), ("w2", "<f4"), ("n", "<i4")])


_FST_STATE = struct.Struct("<ffq")  # final weight (LatticeWeight), number of arcs


def fst_bytes(fst: bytes | kaldifst.Lattice) -> bytes:
    """A kaldifst.Lattice in OpenFst's binary VectorFst layout (the compiled search's raw
    lattice already is): kaldifst can only write that to a file, and the file is in memory
    (/dev/shm where there is one)."""
    if isinstance(fst, bytes):
        return fst
    shm = Path("/dev/shm")
    fd, name = tempfile.mkstemp(suffix=".fst", dir=shm if shm.is_dir() else None)
    try:
        os.close(fd)
        if not fst.write(name):
            raise AsrdistError(f"kaldifst could not write the raw lattice to {name}")
        return Path(name).read_bytes()
    finally:
        os.unlink(name)


def from_kaldifst(fst: bytes | kaldifst.Lattice) -> Lattice:
    """A kaldifst.Lattice, exact float32 weights (unlike its text form), read from its binary
    layout (:func:`fst_bytes`), 30x faster than its arc iterator's Python calls."""
    data = fst_bytes(fst)
    pos = 4  # magic
    for _ in range(2):  # fst type ("vector"), arc type ("lattice4")
        pos += 4 + struct.unpack_from("<i", data, pos)[0]
    start, num_states = struct.unpack_from("<qq", data, pos + 16)  # after version, flags, props
    pos += 40
    final_bytes: list[bytes] = []
    counts: list[int] = []
    chunks: list[bytes] = []
    state = _FST_STATE.unpack_from
    for _ in range(num_states):
        k = state(data, pos)[2]
        final_bytes.append(data[pos:pos + 8])
        pos += 16
        counts.append(k)
        chunks.append(data[pos:pos + 20 * k])
        pos += 20 * k
    costs = np.frombuffer(b"".join(final_bytes), "<f4")
    finals: list[Weight] = list(zip(list(costs[0::2]), list(costs[1::2]), strict=True))
    table = np.frombuffer(b"".join(chunks), _FST_ARC)
    flat = list(zip(table["i"].tolist(), table["o"].tolist(),
                    zip(list(table["w1"]), list(table["w2"]), strict=True), table["n"].tolist(),
                    strict=True))
    arcs, lo = [], 0
    for k in counts:
        arcs.append(flat[lo:lo + k])
        lo += k
    return Lattice(arcs, finals, start)
