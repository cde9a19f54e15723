"""asrdist's route-2 Switchboard data prep against the data dirs Kaldi's own egs/swbd/s5c scripts
made from the same fixture tree (tests/corpus/kaldi_expected/swbd300, remade by its
regenerate.sh): byte for byte, nothing derived from asrdist."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from asrdist.corpus.swbd_prepare import SwbdOptions, prepare_swbd
from asrdist.kaldi.data_dir import read_table
from tests.corpus.ldc_fixture import make_prep_tree

KALDI = Path(__file__).parent / "kaldi_expected" / "swbd300"
FILES = ["text", "segments", "utt2spk", "spk2utt", "reco2file_and_channel"]


@pytest.fixture(scope="module")
def prepared(tmp_path_factory):
    root = tmp_path_factory.mktemp("swbd_kaldi")
    tree = make_prep_tree(root / "ldc")
    out = root / "data"
    prepare_swbd(out, SwbdOptions(str(tree.swbd_audio), str(tree.ms98),
                                  str(tree.eval2000_audio), str(tree.eval2000_ref),
                                  dev_utts=100, max_dup=300, speed_factors=(0.9, 1.0, 1.1),
                                  allow_partial=True))  # the fixture is a small corpus
    return out


@pytest.mark.parametrize("name", ["train", "train_dev", "train_nodup", "train_nodup_sp",
                                  "eval2000"])
def test_data_dir_is_kaldis_byte_for_byte(prepared, name):
    files = FILES + (["stm", "glm"] if name == "eval2000" else [])
    for f in files:
        ours = (prepared / name / f).read_bytes()
        kaldi = (KALDI / name / f).read_bytes()
        assert ours == kaldi, f"{name}/{f}: {_first_difference(ours, kaldi)}"


def test_acronym_map_is_s5cs(prepared):
    assert ((prepared / "local" / "dict_nosp" / "acronyms.map").read_bytes()
            == (KALDI / "acronyms.map").read_bytes())


def test_the_kaldi_dirs_hold_the_awkward_cases():
    """What the comparison covers, read from Kaldi's output (so a fixture change that loses a
    case shows here)."""
    train, nodup = read_table(KALDI / "train" / "text"), read_table(KALDI / "train_nodup" / "text")
    dev = read_table(KALDI / "train_dev" / "text")
    nodev = Counter(t for u, t in train.items() if u not in dev)
    kept = Counter(nodup.values())
    assert nodev["uh-huh"] > 400 and nodev["yeah"] > 300 and nodev["right"] == 300
    assert kept["right"] == 300 and kept["uh-huh"] != 300  # a draw per line, not a cut at 300
    words = set(" ".join(train.values()).split())
    assert {"--", "ammn-t-", "ex", "i._b._m.", "t._v.s", "u._c._l._a.", "[silence]"} <= words
    segs = read_table(KALDI / "train" / "segments")
    assert "sw02005-A_000200-000211" in segs and "sw02005-A_000240-000250" not in segs
    assert segs["sw02005-A_000200-000211"].split()[1:] == ["2", "2.11"]
    sp = read_table(KALDI / "train_nodup_sp" / "segments")
    assert sp["sp1.0-sw02005-A_000200-000211"] == "sw02005-A 2 2.11"  # copy_data_dir.sh's
    assert sp["sp0.9-sw02005-A_000200-000211"] == "sp0.9-sw02005-A 2.22 2.34"
    assert "sp1.1-sw02005-A_000200-000211" not in sp  # 1.82-1.92: under 0.1 s in float
    ev = read_table(KALDI / "eval2000" / "segments")
    assert ev["en_4156-A_000005-000112"].split()[1:] == ["0.00", "1.21"]  # 1.13 s -> 000112


def _first_difference(ours: bytes, kaldi: bytes) -> str:
    a, b = ours.decode().splitlines(), kaldi.decode().splitlines()
    for n, (x, y) in enumerate(zip(a, b, strict=False), 1):
        if x != y:
            return f"line {n}: ours {x!r}, Kaldi's {y!r}"
    return f"ours has {len(a)} lines, Kaldi's {len(b)}"
