"""Extra per-frame streams joined onto features: fMLLR-like and periodic i-vector-like scps."""

from __future__ import annotations

import kaldiio
import numpy as np
import pytest

from asrdist.data.join import Stream, join_features
from asrdist.errors import AsrdistError
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
