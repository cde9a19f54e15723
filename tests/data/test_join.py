"""Extra per-frame streams joined onto features: fMLLR-like and periodic i-vector-like scps."""

from __future__ import annotations

import kaldiio
import numpy as np
import pytest

from asrdist.data.join import Stream, join_features
from asrdist.errors import AsrdistError
from asrdist.kaldi.layout import ColumnRange, read_layout
from asrdist.stage import Skipped
from tests.cli_process import run_cli


def _scp(path, mats):
    with kaldiio.WriteHelper(f"ark,scp:{path}.ark,{path}.scp") as w:
        for utt, m in mats.items():
            w(utt, np.asarray(m, dtype=np.float32))
    return f"{path}.scp"


@pytest.fixture
def src(tmp_path):
    d = tmp_path / "fbank"
    d.mkdir()
    rng = np.random.default_rng(0)
    feats = {"s1-u1": rng.normal(size=(23, 4)), "s1-u2": rng.normal(size=(40, 4))}
    _scp(d / "raw", feats)
    (d / "raw.scp").rename(d / "feats.scp")
    (d / "utt2spk").write_text("s1-u1 s1\ns1-u2 s1\n")
    (d / "text").write_text("s1-u1 a\ns1-u2 b\n")
    return d, feats


def test_streams_are_pasted_per_frame_with_periodic_rows_repeated(src, tmp_path):
    d, feats = src
    fmllr = _scp(tmp_path / "fmllr", {u: np.full((len(f) + 1, 3), 7.0) for u, f in feats.items()})
    ivec = _scp(tmp_path / "ivec", {u: np.arange(-(-len(f) // 10))[:, None] * np.ones((1, 2))
                                    for u, f in feats.items()})
    joined = join_features(d, tmp_path / "joined", [Stream.parse(fmllr),
                                                    Stream.parse(ivec + ":10")])
    assert joined == tmp_path / "joined"
    out = kaldiio.load_scp(str(tmp_path / "joined" / "feats.scp"))
    u1 = out["s1-u1"]
    assert u1.shape == (23, 4 + 3 + 2)
    np.testing.assert_allclose(u1[:, :4], feats["s1-u1"], rtol=1e-6)
    assert (u1[:, 4:7] == 7).all()
    assert u1[9, 7] == 0 and u1[10, 7] == 1 and u1[22, 8] == 2
    stats = kaldiio.load_scp(str(tmp_path / "joined" / "cmvn.scp"))["s1"]
    assert stats.shape == (2, 10) and stats[0, -1] == 63
    assert (tmp_path / "joined" / "utt2num_frames").read_text() == "s1-u1 23\ns1-u2 40\n"
    assert isinstance(join_features(d, tmp_path / "joined", [Stream.parse(fmllr),
                                                             Stream.parse(ivec + ":10")]),
                      Skipped)


def test_a_stream_too_short_or_missing_an_utterance_is_named(src, tmp_path):
    d, feats = src
    short = _scp(tmp_path / "short", {u: np.ones((len(f) - 5, 3)) for u, f in feats.items()})
    with pytest.raises(AsrdistError, match="utterance s1-u1: 18 frames after expansion, the "
                                           "features have 23"):
        join_features(d, tmp_path / "j1", [Stream.parse(short)])
    partial = _scp(tmp_path / "partial", {"s1-u1": np.ones((23, 3))})
    proc = run_cli("join_feats", d, tmp_path / "j2", partial)
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines()[-1] == (
        f"Error: stream {partial}: no entry for utterance s1-u2")


def test_deltas_are_kaldis_add_deltas_worked_by_hand(tmp_path):
    """A 4-frame 1-dim ramp 0 1 2 3. add-deltas (order 2, window 2): the delta filter is
    [-2 -1 0 1 2] / 10, the delta-delta one that filter convolved with itself,
    [4 4 1 -4 -10 -4 1 4 4] / 100, both read from the frames with the first/last repeated
    beyond the edges (frames -2..5 are 0 0 | 0 1 2 3 | 3 3):
      delta(0) = (-2*0 - 0 + 1 + 2*2) / 10 = 0.5     delta(1) = (-0 - 0 + 2 + 2*3) / 10 = 0.8
      delta(2) = (-0 - 1 + 3 + 2*3) / 10 = 0.8       delta(3) = (-2*1 - 2 + 3 + 2*3) / 10 = 0.5
      dd(0): frames 0 0 0 0 0 1 2 3 3 -> (-4*1 + 1*2 + 4*3 + 4*3) / 100 = 0.22
      dd(1): frames 0 0 0 0 1 2 3 3 3 -> (-10*1 - 4*2 + 3 + 12 + 12) / 100 = 0.09
      dd(2): frames 0 0 0 1 2 3 3 3 3 -> (-4 - 20 - 12 + 3 + 12 + 12) / 100 = -0.09
      dd(3): frames 0 0 1 2 3 3 3 3 3 -> (1 - 8 - 30 - 12 + 3 + 12 + 12) / 100 = -0.22"""
    d = tmp_path / "src"
    d.mkdir()
    (d / "utt2spk").write_text("u1 s1\n")
    scp = _scp(d / "feats", {"u1": [[0.0], [1.0], [2.0], [3.0]]})
    assert scp == str(d / "feats.scp")
    join_features(d, tmp_path / "joined", [], delta_order=2)
    out = kaldiio.load_scp(str(tmp_path / "joined" / "feats.scp"))["u1"]
    np.testing.assert_allclose(out, [[0, 0.5, 0.22], [1, 0.8, 0.09], [2, 0.8, -0.09],
                                     [3, 0.5, -0.22]], atol=1e-6)
    assert read_layout(tmp_path / "joined") == (ColumnRange(0, 3, "spk", 2, f"{d}/feats.scp"),)


def test_the_layout_names_each_streams_columns_and_normalisation(src, tmp_path):
    d, feats = src
    fmllr = _scp(tmp_path / "fmllr", {u: np.ones((len(f), 3)) for u, f in feats.items()})
    ivec = _scp(tmp_path / "ivec", {u: np.ones((-(-len(f) // 10), 5)) for u, f in feats.items()})
    mfcc = _scp(tmp_path / "mfcc", {u: np.ones((len(f), 2)) for u, f in feats.items()})
    streams = [Stream.parse(fmllr), Stream.parse(ivec + ":10"), Stream.parse(mfcc + ":utt")]
    assert [(s.period, s.norm) for s in streams] == [(1, "none"), (10, "none"), (1, "utt")]
    join_features(d, tmp_path / "joined", streams, delta_order=2)
    out = kaldiio.load_scp(str(tmp_path / "joined" / "feats.scp"))
    assert out["s1-u1"].shape == (23, 4 * 3 + 3 + 5 + 2)
    assert (tmp_path / "joined" / "feats_layout").read_text().splitlines()[-4:] == [
        f"0 12 spk 2 {d}/feats.scp", f"12 15 none 0 {fmllr}",
        f"15 20 none 0 {ivec}:10", f"20 22 utt 0 {mfcc}"]
    stats = kaldiio.load_scp(str(tmp_path / "joined" / "cmvn.scp"))["s1"]
    assert stats.shape == (2, 23)  # every column's stats; each spk range takes its own


def test_join_refuses_what_it_cannot_join(src, tmp_path):
    d, feats = src
    with pytest.raises(AsrdistError, match="nothing to join: give a stream, or --delta-order"):
        join_features(d, tmp_path / "j0", [])
    wide = _scp(tmp_path / "wide", {"s1-u1": np.ones((23, 3)), "s1-u2": np.ones((40, 4))})
    with pytest.raises(AsrdistError, match=f"stream {wide}: utterance s1-u2 has 4 columns, the "
                                           "first utterance 3"):
        join_features(d, tmp_path / "j1", [Stream.parse(wide)])
    join_features(d, tmp_path / "j2", [], delta_order=1)
    with pytest.raises(AsrdistError, match="feats_layout: SRC is joined already"):
        join_features(tmp_path / "j2", tmp_path / "j3", [], delta_order=1)


@pytest.mark.parametrize("line, message", [
    ("0 4 spk", "expected 'begin end norm deltas \\[source\\]'"),
    ("0 4 cmn 0", "normalisation 'cmn': choose one of spk, utt, none"),
    ("0 4 spk 2", "columns 0..4 with delta order 2: not a range of whole delta blocks"),
])
def test_a_bad_layout_line_is_named(tmp_path, line, message):
    (tmp_path / "feats_layout").write_text(f"# header\n{line}\n")
    with pytest.raises(AsrdistError, match=f"feats_layout:2: {message}"):
        read_layout(tmp_path)
    (tmp_path / "feats_layout").write_text("0 4 spk 0\n5 6 none 0\n")
    with pytest.raises(AsrdistError, match="columns 5..6 do not start where the previous "
                                           "range ends \\(4\\)"):
        read_layout(tmp_path)


def test_the_joined_dir_keeps_how_src_was_made(src, tmp_path):
    """SRC's feats_config.json comes along, so a model trained on the joined features still
    refuses test features of another rate or kind."""
    d, _ = src
    (d / "feats_config.json").write_text('{"kind": "fbank", "sampling_rate": 8000}\n')
    join_features(d, tmp_path / "joined", [], delta_order=1)
    assert (tmp_path / "joined" / "feats_config.json").read_text() == \
        '{"kind": "fbank", "sampling_rate": 8000}\n'
