from __future__ import annotations

from pathlib import Path

import kaldiio
import numpy as np
import pytest
import soundfile

from asrdist.data.features import (
    FeatureOptions,
    compute_features,
    make_extractor,
    make_features,
    num_frames,
)
from asrdist.errors import AsrdistError
from asrdist.kaldi.cmvn import apply_cmvn, cmvn_stats
from asrdist.kaldi.data_dir import read_table
from asrdist.stage import Skipped


@pytest.mark.parametrize("n", [400, 401, 559, 560, 16000, 22222])
def test_frame_count_is_kaldi_snip_edges(n):
    samples = np.random.default_rng(n).standard_normal(n) * 1000
    feats = compute_features(samples, make_extractor(FeatureOptions("fbank")), 16000)
    assert feats.shape == (1 + (n - 400) // 160, 40) == (num_frames(n), 40)


def test_feature_dims():
    samples = np.random.default_rng(0).standard_normal(8000) * 1000
    mfcc = compute_features(samples, make_extractor(FeatureOptions("mfcc")), 16000)
    fbank = compute_features(samples, make_extractor(FeatureOptions("fbank")), 16000)
    assert mfcc.shape[1] == 13 and fbank.shape[1] == 40
    assert mfcc.dtype == fbank.dtype == np.float32
    assert np.all(np.isfinite(mfcc)) and np.all(np.isfinite(fbank))


def test_cmvn_stats_layout():
    feats = np.arange(12, dtype=np.float32).reshape(4, 3)
    stats = cmvn_stats(feats)
    assert stats.dtype == np.float64 and stats.shape == (2, 4)
    np.testing.assert_array_equal(stats[0], [18, 22, 26, 4])
    np.testing.assert_array_equal(stats[1], [126, 166, 214, 0])


def test_apply_cmvn_normalises_mean_and_variance():
    rng = np.random.default_rng(1)
    parts = [rng.normal(5, 3, size=(n, 4)) for n in (30, 50)]
    stats = cmvn_stats(parts[0]) + cmvn_stats(parts[1])
    joined = np.concatenate([apply_cmvn(p, stats) for p in parts])
    np.testing.assert_allclose(joined.mean(axis=0), 0, atol=1e-5)
    scaled = np.concatenate([apply_cmvn(p, stats, norm_vars=True) for p in parts])
    np.testing.assert_allclose(scaled.std(axis=0), 1, atol=1e-5)
    with pytest.raises(AsrdistError, match="do not fit"):
        apply_cmvn(parts[0], stats[:, :3])


def test_make_features_outputs(feat_src_dir: Path, feat_src_lengths: dict, tmp_path: Path):
    dest = tmp_path / "fbank"
    assert make_features(feat_src_dir, dest, FeatureOptions("fbank"), nj=1) == dest.resolve()
    feats = kaldiio.load_scp(str(dest / "feats.scp"))
    assert list(feats) == sorted(feat_src_lengths)
    frames = {k: int(v) for k, v in read_table(dest / "utt2num_frames").items()}
    for utt, n in feat_src_lengths.items():
        assert feats[utt].shape == (1 + (n - 400) // 160, 40) and frames[utt] == len(feats[utt])
    cmvn = kaldiio.load_scp(str(dest / "cmvn.scp"))
    utt2spk = read_table(dest / "utt2spk")
    for spk, stats in cmvn.items():
        mats = [feats[u].astype(np.float64) for u in utt2spk if utt2spk[u] == spk]
        stacked = np.concatenate(mats)
        assert stats.dtype == np.float64 and stats.shape == (2, 41)
        np.testing.assert_allclose(stats[0, :-1], stacked.sum(axis=0), rtol=1e-9)
        np.testing.assert_allclose(stats[1, :-1], (stacked**2).sum(axis=0), rtol=1e-9)
        assert stats[0, -1] == len(stacked) and stats[1, -1] == 0
        normed = np.concatenate([apply_cmvn(m, stats) for m in mats])
        np.testing.assert_allclose(normed.mean(axis=0), 0, atol=1e-3)
    for name in ("wav.scp", "text", "utt2spk", "spk2utt"):
        assert (dest / name).read_text() == (feat_src_dir / name).read_text()
    assert (dest / "frame_shift").read_text().strip() == "0.01"
    # Same options again: nothing to do.
    assert isinstance(make_features(feat_src_dir, dest, FeatureOptions("fbank"), nj=1), Skipped)


def test_parallel_jobs_give_the_same_features(feat_src_dir: Path, tmp_path: Path):
    make_features(feat_src_dir, tmp_path / "one", FeatureOptions("mfcc"), nj=1)
    make_features(feat_src_dir, tmp_path / "three", FeatureOptions("mfcc"), nj=3)
    one = kaldiio.load_scp(str(tmp_path / "one" / "feats.scp"))
    three = kaldiio.load_scp(str(tmp_path / "three" / "feats.scp"))
    assert list(one) == list(three)
    for utt in one:
        np.testing.assert_array_equal(one[utt], three[utt])
    assert len(list((tmp_path / "three" / "data").glob("raw_mfcc_src.*.ark"))) == 3


def test_int16_scale_matches_kaldi_energy(feat_src_dir: Path):
    """Kaldi reads wavs as int16 values: log energies sit ~ln(32768**2) above float scale."""
    samples, _ = soundfile.read(read_table(feat_src_dir / "wav.scp")["spkA-002"], dtype="int16")
    extractor = make_extractor(FeatureOptions("fbank"))
    int_scale = compute_features(samples, extractor, 16000)
    unit_scale = compute_features(samples / 32768.0, extractor, 16000)
    np.testing.assert_allclose(int_scale - unit_scale, 2 * np.log(32768), atol=1e-2)


def test_unreadable_wav_names_utterance_and_file(feat_src_dir: Path, tmp_path: Path):
    wav = Path(read_table(feat_src_dir / "wav.scp")["spkB-002"])
    wav.write_bytes(b"not a wav file")
    with pytest.raises(AsrdistError, match=f"utterance spkB-002: cannot read audio '{wav}'"):
        make_features(feat_src_dir, tmp_path / "out", FeatureOptions("fbank"))
    assert not (tmp_path / "out" / "feats.scp").exists()


def test_empty_data_dir_is_an_error(tmp_path: Path):
    src = tmp_path / "empty"
    src.mkdir()
    for name in ("wav.scp", "text", "utt2spk", "spk2utt"):
        (src / name).write_text("")
    with pytest.raises(AsrdistError, match="wav.scp is empty"):
        make_features(src, tmp_path / "out", FeatureOptions("fbank"))


def _segmented_dir(tmp_path: Path) -> tuple[Path, dict[str, int | None]]:
    """Two recordings: rec1 of exactly 2 s, rec2 of 0.05 s (its speaker has only that)."""
    src = tmp_path / "seg"
    src.mkdir()
    rng = np.random.default_rng(3)
    for reco, n in (("rec1", 32000), ("rec2", 800)):
        soundfile.write(tmp_path / f"{reco}.wav", (rng.standard_normal(n) * 1000).astype(np.int16),
                        16000, "PCM_16")
    segments = {  # utt: (reco, start, end, kept frames or None)
        "spkA-a": ("rec1", "0.0", "1.0", 98),
        "spkA-b": ("rec1", "0.0", "0.1000001", 8),  # just over the float 0.1
        "spkA-c": ("rec1", "1.0", "1.1", None),  # 0.1000000000000001 < 0.1f: too short
        "spkA-d": ("rec1", "0.25", "0.35", None),  # 0.0999999999999999: too short
        "spkA-e": ("rec1", "1.5", "2.5", 48),  # 0.5 s past the end: clipped to 2.0
        "spkA-f": ("rec1", "1.5", "2.5000001", None),  # more than 0.5 s past
        "spkA-g": ("rec1", "2.0", "2.3", None),  # starts at the end: nothing left
        "spkA-h": ("rec1", "2.05", "2.3", None),  # starts past the end
        "spkA-i": ("rec1", "0.3", "0.2", None),  # invalid
        # -1: to the end, 2.0 - 1.9 = 0.10000000000000009 in double: under 0.1f
        "spkA-j": ("rec1", "1.9", "-1", None),
        "spkB-x": ("rec2", "0.0", "0.05", None),
    }
    (src / "wav.scp").write_text(f"rec1 {tmp_path / 'rec1.wav'}\nrec2 {tmp_path / 'rec2.wav'}\n")
    (src / "segments").write_text("".join(f"{u} {r} {s} {e}\n"
                                          for u, (r, s, e, _) in segments.items()))
    (src / "text").write_text("".join(f"{u} words of {u}\n" for u in segments))
    (src / "utt2spk").write_text("".join(f"{u} {u[:4]}\n" for u in segments))
    (src / "spk2utt").write_text("spkA " + " ".join(u for u in segments if u < "spkB")
                                 + "\nspkB spkB-x\n")
    (src / "reco2file_and_channel").write_text("rec1 rec1 A\nrec2 rec2 A\n")
    (src / "spk2gender").write_text("spkA f\nspkB m\n")
    return src, {u: s[3] for u, s in segments.items()}


def test_segments_skipped_as_extract_segments_skips_them(tmp_path: Path, caplog):
    src, expected = _segmented_dir(tmp_path)
    dest = tmp_path / "fbank"
    with caplog.at_level("WARNING"):
        make_features(src, dest, FeatureOptions("fbank"))
    kept = {u for u, frames in expected.items() if frames is not None}
    frames = {u: int(n) for u, n in read_table(dest / "utt2num_frames").items()}
    assert frames == {u: expected[u] for u in kept}
    assert set(kaldiio.load_scp(str(dest / "feats.scp"))) == kept
    lines = [r.getMessage() for r in caplog.records if "skipped" in r.getMessage()]
    assert len(lines) == 1
    assert f"skipped {len(expected) - len(kept)} of {len(expected)} utterances" in lines[0]
    for utt in set(expected) - kept:
        assert utt in lines[0]
    assert "1 empty or invalid: spkA-i" in lines[0]
    assert "1 ends more than 0.5 s past the end of its recording: spkA-f" in lines[0]
    assert "1 starts past the end of its recording: spkA-h" in lines[0]
    # the data dir as utils/fix_data_dir.sh leaves it: spkB and rec2 gone with spkB-x
    for name in ("text", "utt2spk", "segments"):
        assert set(read_table(dest / name)) == kept
    assert (dest / "spk2utt").read_text() == "spkA " + " ".join(sorted(kept)) + "\n"
    assert (dest / "spk2gender").read_text() == "spkA f\n"
    assert set(read_table(dest / "wav.scp")) == set(read_table(dest / "reco2file_and_channel")) \
        == {"rec1"}
    assert set(read_table(dest / "cmvn.scp")) == {"spkA"}


def test_no_utterance_left_is_an_error(tmp_path: Path):
    src, _ = _segmented_dir(tmp_path)
    (src / "segments").write_text("spkA-c rec1 1.0 1.1\nspkB-x rec2 0.0 0.05\n")
    (src / "text").write_text("spkA-c w\nspkB-x w\n")
    (src / "utt2spk").write_text("spkA-c spkA\nspkB-x spkB\n")
    (src / "spk2utt").write_text("spkA spkA-c\nspkB spkB-x\n")
    with pytest.raises(AsrdistError, match="no utterance left"):
        make_features(src, tmp_path / "out", FeatureOptions("fbank"))
    assert not (tmp_path / "out" / "feats.scp").exists()


def test_unsegmented_wav_too_short_for_a_frame_is_skipped(feat_src_dir: Path, tmp_path: Path):
    wav = Path(read_table(feat_src_dir / "wav.scp")["spkB-002"])
    soundfile.write(wav, np.zeros(300, dtype=np.int16), 16000, "PCM_16")
    make_features(feat_src_dir, tmp_path / "out", FeatureOptions("fbank"))
    assert "spkB-002" not in read_table(tmp_path / "out" / "wav.scp")
    assert "spkB-002" not in read_table(tmp_path / "out" / "utt2num_frames")
    assert "spkB-002" not in (tmp_path / "out" / "spk2utt").read_text()
