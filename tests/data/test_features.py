from __future__ import annotations

import json
import shutil
from pathlib import Path

import kaldiio
import numpy as np
import pytest
import soundfile

from asrdist.data import features
from asrdist.data.features import (
    FeatureOptions,
    compute_features,
    make_extractor,
    make_features,
    num_frames,
)
from asrdist.errors import AsrdistError
from asrdist.kaldi.cmvn import apply_cmvn, cmvn_stats
from asrdist.kaldi.data_dir import Utterance, c_sorted, read_table, write_data_dir
from asrdist.kaldi.sphere import change_speed, read_sphere
from asrdist.kaldi.wav_scp import SPEED_WARNING
from asrdist.stage import Skipped
from asrdist.testing.sphere_writer import mulaw_decode, mulaw_encode, write_sphere


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


def test_high_freq_zero_keeps_the_band_below_nyquist():
    """Kaldi's --high-freq 0 (Nyquist) sees a 3.8 kHz tone at 8 kHz; lhotse's -400 cuts it."""
    tone = np.sin(2 * np.pi * 3800 * np.arange(8000) / 8000) * 1000
    top = {}
    for high in (None, 0.0):
        options = FeatureOptions("fbank", num_mel_bins=23, sample_rate=8000, high_freq=high)
        top[high] = compute_features(tone, make_extractor(options), 8000)[:, -1].mean()
    assert top[0.0] > top[None] + 5  # log-mel: the tone is in the last bin only with 0


def test_high_freq_unset_keeps_the_old_fingerprint_and_bad_values_are_refused():
    assert FeatureOptions("mfcc").fingerprint() == {
        "kind": "mfcc", "num_mel_bins": 23, "num_ceps": 13, "sample_rate": 16000}
    assert FeatureOptions("mfcc", high_freq=0.0).fingerprint()["high_freq"] == 0.0
    with pytest.raises(AsrdistError, match="--high-freq 4500"):
        FeatureOptions("mfcc", sample_rate=8000, high_freq=4500)


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


SPEEDS = (0.9, 1.0, 1.1)


def _sphere_dirs(tmp_path: Path) -> tuple[Path, Path]:
    """The same utterances twice: a data dir whose wav.scp is Kaldi's (s5c sph2pipe pipes, sox
    speed stages from perturb_data_dir_speed.sh) over two-channel shorten mu-law SPHERE files,
    its sph2pipe not installed; and one of plain wav files holding what those pipes give: the
    channel's samples through mu-law (sph2pipe -p), sped up by change_speed (sox's stand-in)."""
    rng = np.random.default_rng(11)
    sph2pipe = tmp_path / "kaldi" / "tools" / "sph2pipe_v2.5" / "sph2pipe"  # not there
    sph_dir, wav_dir = tmp_path / "sph_src", tmp_path / "wav_src"
    tables: dict[Path, dict[str, list[str]]] = {d: {} for d in (sph_dir, wav_dir)}
    for conv in ("sw02001", "sw02005"):
        n = 8000 * 3 + int(rng.integers(0, 800))
        t = np.arange(n) / 8000
        x = np.stack([3000 * np.sin(2 * np.pi * f * t) + rng.normal(0, 400, n)
                      for f in rng.uniform(150, 900, 2)], 1).astype(np.int16)
        sph = tmp_path / "LDC" / f"{conv}.sph"
        write_sphere(sph, x)
        decoded = mulaw_decode(mulaw_encode(x))
        for channel, side in ((1, "A"), (2, "B")):
            for speed in SPEEDS:
                prefix = "" if speed == 1.0 else f"sp{speed:g}-"
                reco = f"{prefix}{conv}-{side}"
                pipe = f"{sph2pipe} -f wav -p -c {channel} {sph} |"
                if speed != 1.0:
                    pipe += f" sox -t wav - -t wav - speed {speed:g} |"
                wav = tmp_path / "wav" / f"{reco}.wav"
                wav.parent.mkdir(exist_ok=True)
                samples = decoded[:, channel - 1]
                soundfile.write(wav, change_speed(samples, speed) if speed != 1.0 else samples,
                                8000, "PCM_16")
                for d, value in ((sph_dir, pipe), (wav_dir, str(wav))):
                    table = tables[d]
                    table.setdefault("wav.scp", []).append(f"{reco} {value}")
                    spk = reco
                    utts = []
                    for start in (0.0, 1.0, 2.0):
                        s, e = start / speed, (start + 0.9) / speed
                        utt = f"{reco}_{round(s * 100):06d}-{round(e * 100):06d}"
                        table.setdefault("segments", []).append(f"{utt} {reco} {s:.2f} {e:.2f}")
                        table.setdefault("text", []).append(f"{utt} words")
                        table.setdefault("utt2spk", []).append(f"{utt} {spk}")
                        utts.append(utt)
                    table.setdefault("spk2utt", []).append(" ".join([spk, *utts]))
    for d, table in tables.items():
        d.mkdir()
        for name, lines in table.items():
            (d / name).write_text("".join(f"{line}\n" for line in sorted(lines)))
    return sph_dir, wav_dir


@pytest.fixture
def no_kaldi_tools(tmp_path: Path, monkeypatch) -> Path:
    """PATH without sph2pipe or sox: an empty folder."""
    empty = tmp_path / "empty_path"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    return empty


def test_kaldi_sph2pipe_pipes_read_in_process(tmp_path: Path, no_kaldi_tools, caplog,
                                              monkeypatch):
    sph_dir, wav_dir = _sphere_dirs(tmp_path)
    decoded = []

    def counted(path):
        decoded.append(Path(path).name)
        return read_sphere(path)

    monkeypatch.setattr(features, "read_sphere", counted)
    options = FeatureOptions("fbank", sample_rate=8000)
    with caplog.at_level("WARNING"):
        make_features(sph_dir, tmp_path / "sph_feats", options)
    assert sorted(decoded) == ["sw02001.sph", "sw02005.sph"]  # once each, for 2 sides x 3 speeds
    assert [r.getMessage() for r in caplog.records].count(SPEED_WARNING) == 1
    make_features(wav_dir, tmp_path / "wav_feats", options)
    got = kaldiio.load_scp(str(tmp_path / "sph_feats" / "feats.scp"))
    want = kaldiio.load_scp(str(tmp_path / "wav_feats" / "feats.scp"))
    assert list(got) == list(want) == c_sorted(read_table(sph_dir / "segments")) and len(got) == 36
    for utt in want:
        np.testing.assert_array_equal(got[utt], want[utt])
    for name in ("utt2num_frames", "cmvn.scp"):
        assert read_table(tmp_path / "sph_feats" / name).keys() == \
            read_table(tmp_path / "wav_feats" / name).keys()
    assert (tmp_path / "sph_feats" / "utt2num_frames").read_text() == \
        (tmp_path / "wav_feats" / "utt2num_frames").read_text()


def test_each_program_of_the_pipes_is_looked_up_once(tmp_path: Path, no_kaldi_tools,
                                                     monkeypatch):
    """12 wav.scp pipes name two programs (sph2pipe, sox): two PATH searches, not one per
    line (Switchboard's train_nodup_sp has ~15,000 lines and the same two programs)."""
    sph_dir, _ = _sphere_dirs(tmp_path)
    looked_up: list[str] = []
    real_which = shutil.which

    def counting(program: str, *args, **kwargs):
        looked_up.append(Path(program).name)
        return real_which(program, *args, **kwargs)

    monkeypatch.setattr(shutil, "which", counting)
    make_features(sph_dir, tmp_path / "feats", FeatureOptions("fbank", sample_rate=8000))
    assert sorted(looked_up) == ["sox", "sph2pipe"]


def test_jobs_get_whole_files(tmp_path: Path, no_kaldi_tools):
    sph_dir, _ = _sphere_dirs(tmp_path)
    options = FeatureOptions("fbank", sample_rate=8000)
    make_features(sph_dir, tmp_path / "one", options, nj=1)
    make_features(sph_dir, tmp_path / "two", options, nj=2)
    scps = sorted((tmp_path / "two" / "data").glob("raw_fbank_sph_src.*.scp"))
    convs = [{u.split("-")[-3][-7:] for u in read_table(scp)} for scp in scps]
    assert convs == [{"sw02001"}, {"sw02005"}]
    for scp in scps:  # each job's scp sorted, as Kaldi's
        assert list(read_table(scp)) == c_sorted(read_table(scp))
    one = kaldiio.load_scp(str(tmp_path / "one" / "feats.scp"))
    two = kaldiio.load_scp(str(tmp_path / "two" / "feats.scp"))
    assert list(one) == list(two)
    for utt in one:
        np.testing.assert_array_equal(one[utt], two[utt])
    assert (tmp_path / "one" / "cmvn.scp").read_text().split()[::2] == \
        (tmp_path / "two" / "cmvn.scp").read_text().split()[::2]


def test_installed_sph2pipe_runs_as_kaldi_runs_it(tmp_path: Path, no_kaldi_tools):
    """A sph2pipe that exists is run by the shell (here one that writes another wav)."""
    sph_dir, _ = _sphere_dirs(tmp_path)
    other = tmp_path / "other.wav"
    samples = (np.random.default_rng(2).standard_normal(8000 * 4) * 800).astype(np.int16)
    soundfile.write(other, samples, 8000, "PCM_16")
    sph2pipe = tmp_path / "kaldi" / "tools" / "sph2pipe_v2.5" / "sph2pipe"
    sph2pipe.parent.mkdir(parents=True)
    sph2pipe.write_text(f"#!/bin/sh\nexec /bin/cat {other}\n")
    sph2pipe.chmod(0o755)
    wav = read_table(sph_dir / "wav.scp")
    (sph_dir / "wav.scp").write_text("".join(f"{r} {v}\n" for r, v in wav.items()
                                             if "sox" not in v))
    segments = {u: v for u, v in read_table(sph_dir / "segments").items() if v.split()[0] in wav
                and "sox" not in wav[v.split()[0]]}
    for name in ("segments", "text", "utt2spk"):
        table = read_table(sph_dir / name)
        (sph_dir / name).write_text("".join(f"{u} {table[u]}\n" for u in segments))
    (sph_dir / "spk2utt").write_text("".join(
        line for line in (sph_dir / "spk2utt").read_text().splitlines(keepends=True)
        if not line.startswith("sp")))
    make_features(sph_dir, tmp_path / "out", FeatureOptions("fbank", sample_rate=8000))
    got = kaldiio.load_scp(str(tmp_path / "out" / "feats.scp"))
    extractor = make_extractor(FeatureOptions("fbank", sample_rate=8000))
    for utt, value in segments.items():
        _, start, end = value.split()
        cut = samples[round(float(start) * 8000):round(float(end) * 8000)]
        np.testing.assert_array_equal(got[utt], compute_features(cut, extractor, 8000))


def test_missing_sphere_file_stops_before_the_work(tmp_path: Path, no_kaldi_tools):
    sph_dir, _ = _sphere_dirs(tmp_path)
    (tmp_path / "LDC" / "sw02005.sph").unlink()
    with pytest.raises(AsrdistError, match=r"utterance sp0.9-sw02005-A_000000-000100: cannot "
                       r"read audio '.*\| sox -t wav - -t wav - speed 0.9 \|': no such file "
                       f"{tmp_path / 'LDC' / 'sw02005.sph'}$"):
        make_features(sph_dir, tmp_path / "out", FeatureOptions("fbank", sample_rate=8000))
    assert not (tmp_path / "out" / "data").exists()


def test_missing_program_names_the_utterance(feat_src_dir: Path, tmp_path: Path,
                                             no_kaldi_tools):
    wav = read_table(feat_src_dir / "wav.scp")
    wav["spkB-001"] = "flac -c -d -s /L/84-121123-0000.flac |"
    (feat_src_dir / "wav.scp").write_text("".join(f"{u} {v}\n" for u, v in wav.items()))
    with pytest.raises(AsrdistError, match="utterance spkB-001: wav.scp pipe 'flac -c -d -s "
                       r"/L/84-121123-0000.flac \|' needs 'flac', which is not installed"):
        make_features(feat_src_dir, tmp_path / "out", FeatureOptions("fbank"))
    assert not (tmp_path / "out" / "feats.scp").exists()


def test_truncated_wav_names_the_utterance_and_both_lengths(feat_src_dir: Path, tmp_path: Path):
    """A wav.scp pipe cut short (``head -c``) stops the stage naming the utterance, instead of
    features for the part that arrived under the whole transcript."""
    table = read_table(feat_src_dir / "wav.scp")
    wav = Path(table["spkB-003"])
    cut = wav.stat().st_size - 2000
    table["spkB-003"] = f"head -c {cut} {wav} |"
    (feat_src_dir / "wav.scp").write_text("".join(f"{u} {v}\n" for u, v in table.items()))
    with pytest.raises(AsrdistError, match=r"utterance spkB-003: audio 'head -c .*' is truncated:"
                                           r" its wav header declares 80000 bytes of data, "
                                           r"78000 were read"):
        make_features(feat_src_dir, tmp_path / "out", FeatureOptions("fbank"))
    assert not (tmp_path / "out" / "feats.scp").exists()


def test_float_wavs_give_their_int16_twins_features(tmp_path: Path):
    """A float32 and a float64 wav (sox's and librosa's output, samples in [-1, 1]) of a chirp
    give the features of its 16-bit twin within quantisation, not those of near-silence."""
    rate, n = 16000, 16000
    t = np.arange(n) / rate
    chirp = 0.4 * np.sin(2 * np.pi * (100 + 3000 * t) * t)
    chirp += 0.01 * np.random.default_rng(5).standard_normal(n)  # every mel band well above
    utts = []                                                     # the int16 quantisation
    for subtype in ("PCM_16", "FLOAT", "DOUBLE"):
        wav = tmp_path / f"{subtype}.wav"
        soundfile.write(wav, chirp, rate, subtype)
        utts.append(Utterance(f"spk-{subtype}", "spk", "a chirp", str(wav)))
    write_data_dir(tmp_path / "src", utts)
    make_features(tmp_path / "src", tmp_path / "fbank", FeatureOptions("fbank"))
    feats = kaldiio.load_scp(str(tmp_path / "fbank" / "feats.scp"))
    twin = feats["spk-PCM_16"]
    for subtype in ("FLOAT", "DOUBLE"):
        assert feats[f"spk-{subtype}"].shape == twin.shape
        np.testing.assert_allclose(feats[f"spk-{subtype}"], twin, atol=0.02)


def test_truncated_mp3_pipe_is_refused_and_a_bare_mp3_warned(tmp_path: Path, caplog):
    """A truncated mp3 through a pipe (95 of 268 frames, rc 0, before) stops the stage naming
    the utterance; a bare MP3, whose length nothing declares, is read with one warning naming
    it."""
    n = 16000 * 27 // 10
    t = np.arange(n) / 16000
    mp3 = tmp_path / "whole.mp3"
    soundfile.write(mp3, 0.3 * np.sin(2 * np.pi * (200 + 1000 * t) * t), 16000, format="MP3")
    data = mp3.read_bytes()
    bare = tmp_path / "bare.mp3"
    bare.write_bytes(data[data.index(data[:2], 4):])  # without its Xing/Info frame
    cut = f"head -c {len(data) * 35 // 100} {mp3} |"
    write_data_dir(tmp_path / "src", [Utterance("s-bare", "s", "a", str(bare)),
                                      Utterance("s-cut", "s", "b", cut)])
    with caplog.at_level("WARNING"), pytest.raises(
            AsrdistError, match=rf"utterance s-cut: audio 'head -c .*' is truncated: its header "
                                rf"declares {n} samples, \d+ were decoded"):
        make_features(tmp_path / "src", tmp_path / "fbank", FeatureOptions("fbank"))
    assert "utterance s-bare: audio" in caplog.text and "declaring no length" in caplog.text
    assert not (tmp_path / "fbank" / "feats.scp").exists()


def test_features_dir_records_what_made_its_vectors(feat_src_dir: Path, tmp_path: Path):
    """feats_config.json names the kind, the sample rate, the bins and cepstra and the framing:
    what a model trained on the dir keeps and decoding compares."""
    dest = tmp_path / "mfcc"
    make_features(feat_src_dir, dest, FeatureOptions("mfcc", num_ceps=20, num_mel_bins=30))
    config = json.loads((dest / "feats_config.json").read_text())
    assert {k: config[k] for k in ("kind", "sampling_rate", "num_filters", "num_ceps",
                                   "frame_length", "frame_shift", "snip_edges")} == {
        "kind": "mfcc", "sampling_rate": 16000, "num_filters": 30, "num_ceps": 20,
        "frame_length": 0.025, "frame_shift": 0.01, "snip_edges": True}
