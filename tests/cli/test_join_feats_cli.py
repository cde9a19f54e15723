"""asrdist-join-feats as a user runs it: the papers' 260-dim input, and its one-line errors."""

from __future__ import annotations

import kaldiio
import numpy as np

from tests.cli_process import run_cli


def _write(path, mats):
    kaldiio.save_ark(f"{path}.ark", mats, scp=f"{path}.scp")
    return f"{path}.scp"


def test_fbank_with_deltas_fmllr_and_ivectors_is_260_columns(tmp_path):
    rng = np.random.default_rng(0)
    frames = {"s1-u1": 31, "s2-u1": 17}
    src = tmp_path / "fbank"
    src.mkdir()
    _write(src / "feats", {u: rng.normal(size=(n, 40)).astype(np.float32)
                           for u, n in frames.items()})
    (src / "utt2spk").write_text("s1-u1 s1\ns2-u1 s2\n")
    (src / "utt2uniq").write_text("s1-u1 s1-u1\ns2-u1 s2-u1\n")
    fmllr = _write(tmp_path / "fmllr", {u: np.ones((n, 40), np.float32)
                                        for u, n in frames.items()})
    ivec = _write(tmp_path / "ivector_online", {u: np.ones((-(-n // 10), 100), np.float32)
                                                for u, n in frames.items()})
    proc = run_cli("join_feats", "--delta-order", "2", src, tmp_path / "input", fmllr,
                   f"{ivec}:10")
    assert proc.returncode == 0, proc.stderr
    out = kaldiio.load_scp(str(tmp_path / "input" / "feats.scp"))
    assert {u: m.shape for u, m in out.items()} == {"s1-u1": (31, 260), "s2-u1": (17, 260)}
    lines = (tmp_path / "input" / "feats_layout").read_text().splitlines()
    assert [line.split()[:4] for line in lines if not line.startswith("#")] == [
        ["0", "120", "spk", "2"], ["120", "160", "none", "0"], ["160", "260", "none", "0"]]
    assert (tmp_path / "input" / "utt2uniq").is_file()  # held-out by recording needs it


def test_nothing_to_join_is_one_line(tmp_path):
    src = tmp_path / "fbank"
    src.mkdir()
    _write(src / "feats", {"u": np.ones((3, 2), np.float32)})
    (src / "utt2spk").write_text("u s\n")
    proc = run_cli("join_feats", src, tmp_path / "out")
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines()[-1] == (
        "Error: nothing to join: give a stream, or --delta-order")
