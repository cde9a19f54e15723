"""DenominatorLattices and Numerators hold their arrays in a spilled file, not in memory: what
they give back equals the in-memory conversion, the memory they keep does not grow with the
lattices, damaged input is still one line naming it, and the dir they spill to stays empty."""

from __future__ import annotations

import gzip
import tracemalloc
from pathlib import Path

import numpy as np
import pytest

from asrdist.data.dataset import load_corpus
from asrdist.decode.lattice_io import iter_lattices_binary, write_lattices
from asrdist.errors import AsrdistError
from asrdist.kaldi.alignments import read_alignments
from asrdist.testing.denlats import denominator_lattice
from asrdist.train.lattice_arrays import LatticeArrays, lattice_arrays
from asrdist.train.sequence_data import LATTICE_ARRAYS, DenominatorLattices, Numerators
from tests.train.sequence_corpus import make_sequence_corpus

KALDI = Path(__file__).parents[1] / "decode" / "kaldi_post" / "lat.1.gz"  # Kaldi's own


def _denlats(root: Path, lattices: dict, nj: int = 2) -> tuple[Path, dict[str, int]]:
    """``lattices`` written over ``nj`` jobs; every utterance's frames."""
    root.mkdir()
    (root / "num_jobs").write_text(f"{nj}\n")
    utts = sorted(lattices)
    for j in range(nj):
        write_lattices(root / f"lat.{j + 1}.gz", [(u, lattices[u]) for u in utts[j::nj]])
    return root, {u: lattice_arrays(c).frames for u, c in lattices.items()}


def _kaldi_lattices(copies: int) -> dict:
    with gzip.open(KALDI, "rb") as f:
        real = dict(iter_lattices_binary(f.read()))
    return {f"{utt}-{k}": clat for k in range(copies) for utt, clat in real.items()}


def _assert_equal(got: LatticeArrays, want: LatticeArrays) -> None:
    assert (got.start, got.final, got.frames) == (want.start, want.final, want.frames)
    for name in LATTICE_ARRAYS:
        a, b = getattr(got, name), getattr(want, name)
        assert a.dtype == b.dtype, name
        np.testing.assert_array_equal(a, b, err_msg=name)


def test_every_lattice_is_its_in_memory_conversion(tmp_path):
    lattices = _kaldi_lattices(4)
    rng = np.random.default_rng(0)
    lattices |= {f"made-{i}": denominator_lattice(rng, 200, 5, 50) for i in range(5)}
    lat_dir, frames = _denlats(tmp_path / "denlats", lattices, nj=3)
    unwanted = sorted(frames)[::4]
    spill = tmp_path / "spill"
    spill.mkdir()
    store = DenominatorLattices(lat_dir, {u: n for u, n in frames.items() if u not in unwanted},
                                spill_dir=spill)
    assert len(store) == len(lattices) - len(unwanted)
    assert not any(u in store for u in unwanted)
    for utt in sorted(set(frames) - set(unwanted), reverse=True):
        _assert_equal(store.get(utt), lattice_arrays(lattices[utt]))
    assert list(spill.iterdir()) == []


def _kept(lat_dir: Path, frames: dict[str, int], spill: Path) -> tuple[int, int]:
    """(bytes a store of ``lat_dir`` keeps of what asrdist.train allocated, bytes of its
    lattices' arrays). Only asrdist.train's allocations: the parse's tuples that Python's free
    lists keep for reuse are the parser's, and bounded."""
    train = [tracemalloc.Filter(True, "*/asrdist/train/*")]
    tracemalloc.start()
    try:
        before = tracemalloc.take_snapshot().filter_traces(train)
        store = DenominatorLattices(lat_dir, frames, spill_dir=spill)
        after = tracemalloc.take_snapshot().filter_traces(train)
    finally:
        tracemalloc.stop()
    kept = sum(d.size_diff for d in after.compare_to(before, "filename"))
    arrays = sum(getattr(store.get(u), k).nbytes for u in frames for k in LATTICE_ARRAYS)
    return kept, arrays


def test_the_memory_kept_does_not_grow_with_the_lattices(tmp_path):
    """The same 40 utterances with 2 and with 30 words competing at each frame: 15 times the
    arrays, the same memory (the dict of lattices kept all of them)."""
    (tmp_path / "spill").mkdir()
    kept = {}
    for width in (2, 30):
        rng = np.random.default_rng(0)
        lattices = {f"u{i:02d}": denominator_lattice(rng, 300, width, 100) for i in range(40)}
        lat_dir, frames = _denlats(tmp_path / f"w{width}", lattices)
        kept[width] = _kept(lat_dir, frames, tmp_path / "spill")
    (small, small_arrays), (large, large_arrays) = kept[2], kept[30]
    assert large_arrays > 10 * small_arrays > 0
    assert large < large_arrays / 20, kept
    assert abs(large - small) < (large_arrays - small_arrays) / 50, kept


def test_a_damaged_or_missing_archive_is_one_line_naming_it(tmp_path):
    lat_dir, frames = _denlats(tmp_path / "denlats", _kaldi_lattices(2))
    whole = (lat_dir / "lat.2.gz").read_bytes()
    (lat_dir / "lat.2.gz").write_bytes(whole[:len(whole) // 2])
    with pytest.raises(AsrdistError, match=r"lat.2.gz: not a readable lattice archive "
                                           r"\(EOFError: ") as e:
        DenominatorLattices(lat_dir, frames, spill_dir=tmp_path)
    assert "\n" not in str(e.value)
    (lat_dir / "lat.2.gz").unlink()
    with pytest.raises(AsrdistError, match=r"^--denlats \S+denlats: missing lat.2.gz$"):
        DenominatorLattices(lat_dir, frames, spill_dir=tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["denlats"]


def test_a_lattice_of_other_frames_is_refused_naming_it(tmp_path):
    lat_dir, frames = _denlats(tmp_path / "denlats", _kaldi_lattices(1), nj=1)
    utt = sorted(frames)[1]
    with pytest.raises(AsrdistError, match=rf"lat.1.gz: lattice {utt} has {frames[utt]} "
                                           rf"frames, its features {frames[utt] + 1}:"):
        DenominatorLattices(lat_dir, {**frames, utt: frames[utt] + 1}, spill_dir=tmp_path)


def test_numerators_are_the_alignments_fitted(tmp_path):
    corpus_dirs = make_sequence_corpus(tmp_path / "c", utterances=6)
    corpus = load_corpus(corpus_dirs.data, corpus_dirs.targets)
    spill = tmp_path / "spill"
    spill.mkdir()
    numerators = Numerators(corpus_dirs.ali, corpus, spill_dir=spill)
    alignments = dict(read_alignments(corpus_dirs.ali / "ali.1.gz"))
    assert set(alignments) == set(corpus.utts)
    for utt, tids in alignments.items():
        assert utt in numerators
        got = numerators.get(utt)
        assert got.dtype == np.int32
        np.testing.assert_array_equal(got, tids)
    assert "nobody" not in numerators
    assert list(spill.iterdir()) == []
