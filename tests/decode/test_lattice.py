"""Lattices and the sweep on them, against outputs of Kaldi's own binaries (kaldi_expected/,
made by the commands in its README: latgen-faster-mapped, lattice-copy, lattice-scale |
lattice-add-penalty | lattice-best-path). Our lattices are made both ways: by the compiled
search and determinizer (asrdist.decode.lattice._native) and by kaldi-decoder's search and the
Python determinizer, in a process where the compiled module cannot be imported (a checkout that
was not built)."""

from __future__ import annotations

import gzip
import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from asrdist.decode.lattice import ONE, CompactLattice, best_path_words, best_paths
from asrdist.decode.lattice.determinize_pruned import _TaskQueue
from asrdist.decode.lattice_io import (
    compact_lattice_text,
    iter_lattices_binary,
    iter_lattices_text,
)

EXPECTED = Path(__file__).parent / "kaldi_expected"
ROOT = Path(__file__).parents[2]


NOT_BUILT = "asrdist.decode.lattice._native is not built (pip install -e .)"
_WITHOUT_NATIVE = ("import sys\nsys.modules['asrdist.decode.lattice._native'] = None\n"
                   "from asrdist.decode.latgen import main\nsys.exit(main())")


def _latgen(out: Path, path: str, *options: str) -> bytes:
    """Our latgen on the committed inputs (its own process: kaldi_decoder cannot be imported
    after kaldilm, which this test process has loaded), by the compiled determinizer or
    (``path`` "python") without it; the archive, gunzipped."""
    run = ["-m", "asrdist.decode.latgen"] if path == "native" else ["-c", _WITHOUT_NATIVE]
    proc = subprocess.run([sys.executable, *run, *options, str(EXPECTED / "final.mdl"),
                           str(EXPECTED / "HCLG.fst"), str(EXPECTED / "loglikes.ark"), str(out)],
                          check=True, cwd=ROOT, timeout=300, capture_output=True, text=True)
    warned = [line for line in proc.stderr.splitlines() if NOT_BUILT in line]
    assert len(warned) == (path == "python"), proc.stderr  # one line, and only without it
    return gzip.decompress(out.read_bytes())


@pytest.fixture(scope="module", params=["native", "python"])
def our_text(request, tmp_path_factory) -> str:
    return _latgen(tmp_path_factory.mktemp("lat") / "lat.1.gz", request.param, "--text").decode()


@pytest.fixture(scope="module", params=["native", "python"])
def our_binary(request, tmp_path_factory) -> bytes:
    return _latgen(tmp_path_factory.mktemp("lat") / "lat.1.gz", request.param)


def test_lattices_equal_latgen_faster_mappeds_in_kaldi_text(our_text):
    ours = _entries(our_text)
    kaldi = _entries((EXPECTED / "lat.1.txt").read_text())
    assert list(ours) == list(kaldi)
    for key in ("utt1", "utt2", "utt3"):  # byte for byte
        assert ours[key] == kaldi[key]
    # noise1 (102 states): one printed cost in the 6th digit, from an ulp (see below)
    masked = [re.sub(r"[-0-9.e+]+,[-0-9.e+]+,", "W,", e) for e in (ours["noise1"],
                                                                   kaldi["noise1"])]
    assert masked[0] == masked[1]


def _entries(text: str) -> dict[str, str]:
    return {block.split(" ", 1)[0]: block for block in text.split("\n\n") if block}


def test_binary_lattices_equal_kaldis_to_an_ulp(our_binary):
    """Same archive layout, states, arcs, words and transition-ids; a few float32 costs an ulp
    apart (Kaldi's decoder rounds acoustic costs through per-frame offsets computed from
    tokens the lattice no longer holds: see asrdist.decode.lattice.raw.with_cost_offsets)."""
    ours = dict(iter_lattices_binary(our_binary))
    kaldi = dict(iter_lattices_binary((EXPECTED / "lat.1.bin").read_bytes()))
    assert len(our_binary) == len((EXPECTED / "lat.1.bin").read_bytes())
    assert list(ours) == list(kaldi)
    for key in kaldi:
        assert _shape(ours[key]) == _shape(kaldi[key])
        np.testing.assert_allclose(_costs(ours[key]), _costs(kaldi[key]), rtol=2e-7, atol=0)


def _shape(clat: CompactLattice) -> tuple:
    return (clat.start, [[(a[0], a[2], a[3]) for a in arcs] for arcs in clat.arcs],
            [None if f is None else f[1] for f in clat.final])


def _costs(clat: CompactLattice) -> np.ndarray:
    weights = [a[1] for arcs in clat.arcs for a in arcs] + [f[0] for f in clat.final if f]
    return np.array(weights, dtype=np.float64)


def test_text_round_trip():
    text = (EXPECTED / "lat.1.txt").read_text()
    lats = dict(iter_lattices_text(text))
    assert "".join(compact_lattice_text(k, v) for k, v in lats.items()) == text


def _kaldi_sweep() -> dict[tuple[str, str], dict[str, list[int]]]:
    out: dict[tuple[str, str], dict[str, list[int]]] = {}
    for line in (EXPECTED / "sweep.txt").read_text().splitlines():
        lmwt, wip, utt, *words = line.split()
        out.setdefault((lmwt, wip), {})[utt] = [int(w) for w in words]
    return out


def test_sweep_on_our_lattices_equals_kaldis_best_paths(our_binary):
    _check_sweep(dict(iter_lattices_binary(our_binary)))


def test_sweep_on_kaldis_lattices_equals_kaldis_best_paths():
    _check_sweep(dict(iter_lattices_binary((EXPECTED / "lat.1.bin").read_bytes())))


def _check_sweep(lats: dict[str, CompactLattice]) -> None:
    sweep = _kaldi_sweep()
    assert len(sweep) == 39  # s5c's sweep: LMWT 5..17 x WIP 0.0, 0.5, 1.0
    assert len({tuple(point["noise1"]) for point in sweep.values()}) > 1  # the sweep matters
    points = [(float(lmwt), float(wip)) for lmwt, wip in sweep]
    for native in (True, False):  # the compiled sweep, and the Python without it
        paths = {utt: best_paths(clat, points, native=native) for utt, clat in lats.items()}
        for k, ((lmwt, wip), expected) in enumerate(sweep.items()):
            got = {utt: path[k].words for utt, path in paths.items()}
            assert got == expected, (lmwt, wip, native)


def test_lattice_decoding_refuses_a_process_that_loaded_kaldilm_first():
    """kaldi_decoder would hang such a process: one line instead (a process of its own, as
    the test process has loaded kaldi_decoder first: tests/conftest.py)."""
    proc = subprocess.run(
        [sys.executable, "-c", "import kaldi_hmm_gmm, kaldifst, kaldilm\n"
         "from asrdist.decode.decode_dir import decode_data_dir\n"
         "decode_data_dir('g', 'd', 'o', gmm='m')"],
        cwd=ROOT, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines()[-1] == (
        "asrdist.errors.AsrdistError: lattice decoding needs kaldi_decoder, which hangs a process "
        "that imported kaldilm first (asrdist.decode.graph): run it in a process that imports "
        "asrdist.decode.lattice before the graph code")


def test_task_queue_pops_lowest_cost_first():
    rng = np.random.default_rng(0)
    queue = _TaskQueue()
    costs = rng.integers(0, 5, size=50).astype(float)
    for i, c in enumerate(costs):
        queue.push((c, i, 0, []))
    popped = [queue.pop()[0] for _ in costs]
    assert popped == sorted(costs)


def test_word_insertion_penalty_turns_the_best_path():
    cheap = (np.float32(0.1), np.float32(1.0))
    lat = CompactLattice([[(5, cheap, (1,), 1), (6, (np.float32(1.0), np.float32(0.0)), (1,), 2)],
                          [(7, cheap, (1,), 2)], []], [None, None, (ONE, ())], 0)
    # at LMWT 10 two words cost 2 x 0.2 and one word 1.0; a penalty of 1 per word turns it
    assert best_path_words(lat, 10.0, 0.0) == [5, 7]
    assert best_path_words(lat, 10.0, 1.0) == [6]


_READ_BACK = """
import json, sys
import kaldi_hmm_gmm, kaldifst, _kaldifst
import numpy as np
from asrdist.decode.lattice import from_kaldifst

def bits(x):
    return int(np.float32(x).view(np.uint32))

lat = kaldifst.Lattice()
for _ in range(5):
    lat.add_state()
lat.start = 1
values = [0.1, -2.5, 1e-7, 3.4e38, -0.0, 17.000002, float("inf")]
k = 0
for s in range(5):
    for j in range(s % 3 + 1):  # 1, 2 or 3 arcs
        w = kaldifst.LatticeWeight(values[k % 7], values[(k + 3) % 6])
        lat.add_arc(s, kaldifst.LatticeArc(k + 1, 0 if j else 1000 + k, w, (s + j) % 5))
        k += 1
lat.set_final(4, kaldifst.LatticeWeight(0.3, 2.0))
read = from_kaldifst(lat)
ours = {"start": read.start, "final": [[bits(a), bits(b)] for a, b in read.final],
        "arcs": [[[i, o, bits(w[0]), bits(w[1]), n] for i, o, w, n in arcs]
                 for arcs in read.arcs],
        "types": sorted({type(x).__name__ for f in read.final for x in f})}
ref = {"start": lat.start, "final": [], "arcs": []}
for s in range(lat.num_states):  # the reference: kaldifst's own arc iterator
    it, arcs = _kaldifst._ArcIteratorLattice(lat, s), []
    while not it.done:
        a = it.value
        arcs.append([a.ilabel, a.olabel, bits(a.weight.value1), bits(a.weight.value2),
                     a.nextstate])
        it.next()
    ref["arcs"].append(arcs)
    ref["final"].append([bits(lat.final(s).value1), bits(lat.final(s).value2)])
print(json.dumps({"ours": ours, "ref": ref}))
"""


def test_raw_lattice_read_equals_kaldifsts_arc_iterator_bit_for_bit():
    """The raw lattice is read from kaldifst's binary layout, not arc by arc: the same
    states, labels, next states and float32 weights as kaldifst's arc iterator gives (its
    own process: kaldifst's lattices hang in this one, which loaded kaldilm)."""
    out = subprocess.run([sys.executable, "-c", _READ_BACK], cwd=ROOT, capture_output=True,
                         text=True, check=True, timeout=120)
    got = json.loads(out.stdout.splitlines()[-1])
    ours, ref = got["ours"], got["ref"]
    assert sum(len(a) for a in ref["arcs"]) == 1 + 2 + 3 + 1 + 2
    assert ref["final"][0] == [0x7F800000, 0x7F800000]  # not final: Zero
    assert ours["types"] == ["float32"]
    assert {k: ours[k] for k in ref} == ref
