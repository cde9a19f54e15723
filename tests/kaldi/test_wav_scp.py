"""wav.scp values as Kaldi's own scripts write them, and how asrdist reads each."""

from __future__ import annotations

import stat
from pathlib import Path

import numpy as np
import pytest
import soundfile

from asrdist.errors import AsrdistError
from asrdist.kaldi.wav_scp import (
    Pipe,
    SphereChannel,
    WavFile,
    audio_source,
    missing_programs,
    parse_wav_value,
    read_audio,
    wav_data_sizes,
)

# egs/swbd/s5c/path.sh: export KALDI_ROOT=`pwd`/../../..
SPH2PIPE = "/home/u/kaldi/egs/swbd/s5c/../../../tools/sph2pipe_v2.5/sph2pipe"
SW02001 = "/LDC/LDC97S62/swb1_d1/data/sw02001.sph"
# egs/swbd/s5c/local/swbd1_data_prep.sh:111-114 (and eval2000_data_prep.sh:51-54):
#   awk -v sph2pipe=$sph2pipe '{
#     printf("%s-A %s -f wav -p -c 1 %s |\n", $1, sph2pipe, $2);
#     printf("%s-B %s -f wav -p -c 2 %s |\n", $1, sph2pipe, $2);
#   }' < $dir/sph.scp | sort > $dir/wav.scp
S5C_A = f"{SPH2PIPE} -f wav -p -c 1 {SW02001} |"
S5C_B = f"{SPH2PIPE} -f wav -p -c 2 {SW02001} |"
# egs/fisher_swbd/s5/local/fisher_data_prep.sh:164-165 (the same printf)
FISHER_B = (f"{SPH2PIPE} -f wav -p -c 2 "
            "/LDC/LDC2004S13/fe_03_p1_sph1/audio/000/fe_03_00001.sph |")
# utils/perturb_data_dir_speed.sh:99-104, run (apply_map.pl, sed, awk) on S5C_A with factor 0.9:
#   '{wid=$1; $1=""; if ($NF=="|") {print wid $_ " sox -t wav - -t wav - speed " factor " |"}
#     else if (match($0, /:[0-9]+$/)) {print wid " wav-copy" $_ " - | sox ... speed " factor " |" }
#     else  {print wid " sox -t wav" $_ " -t wav - speed " factor " |"}}'
SP09_A = f" {SPH2PIPE} -f wav -p -c 1 {SW02001} | sox -t wav - -t wav - speed 0.9 |"
SP11_FILE = " sox -t wav /data/rec1.wav -t wav - speed 1.1 |"  # its last case: a wav file
# asrdist.corpus.swbd.wav_entry (route 2): asrdist-sph2wav -c N [--speed F] FILE |
OURS_B_SP = f"asrdist-sph2wav -c 2 --speed 1.1 {SW02001} |"


@pytest.mark.parametrize(("value", "expected"), [
    (S5C_A, SphereChannel(SW02001, 1)),
    (S5C_B, SphereChannel(SW02001, 2)),
    (FISHER_B, SphereChannel("/LDC/LDC2004S13/fe_03_p1_sph1/audio/000/fe_03_00001.sph", 2)),
    (SP09_A, SphereChannel(SW02001, 1, 0.9)),
    (OURS_B_SP, SphereChannel(SW02001, 2, 1.1)),
    (f"asrdist-sph2wav -c 1 {SW02001} |", SphereChannel(SW02001, 1)),
    (f"asrdist-sph2wav --channel=2 {SW02001} | sox -t wav - -t wav - speed 0.9 |",
     SphereChannel(SW02001, 2, 0.9)),
    (f"sph2pipe -f wav -p {SW02001} |", SphereChannel(SW02001, 1)),  # no -c: channel 0 read
    (f"sph2pipe -c 2 -p -f wav {SW02001}|", SphereChannel(SW02001, 2)),  # hand-written order
])
def test_sphere_pipes_say_file_channel_and_speed(value, expected):
    pipe = parse_wav_value(value)
    assert isinstance(pipe, Pipe) and pipe.sphere == expected
    assert pipe.ours == value.startswith("asrdist-sph2wav")


def test_programs_of_kaldi_pipes():
    assert parse_wav_value(S5C_A).programs == (SPH2PIPE,)
    assert parse_wav_value(SP09_A).programs == (SPH2PIPE, "sox")
    assert parse_wav_value(SP09_A).command == SP09_A.strip()[:-1].strip()
    # egs/librispeech/s5/local/data_prep.sh: "flac -c -d -s $flac |"
    assert parse_wav_value("flac -c -d -s /L/84-121123-0000.flac |").programs == ("flac",)
    mixed = parse_wav_value("LC_ALL=C 2>/dev/null wav-copy ark:/a.ark:16 - | gzip -c|")
    assert mixed.programs == ("wav-copy", "gzip") and mixed.sphere is None


@pytest.mark.parametrize("value", [
    f"{SPH2PIPE} -f wav -p -c 1 -t 10:20 {SW02001} |",  # a time range: not read in-process
    f"{SPH2PIPE} -f sph -c 1 {SW02001} |",  # SPHERE out, not wav
    f"{SPH2PIPE} -f wav -p -c 1 {SW02001} | sox -t wav - -t wav - tempo 0.9 |",
    f"{SPH2PIPE} -f wav -p -c 1 {SW02001} | sox -t wav - -t wav - speed -1 |",
    f"{SPH2PIPE} -f wav -p -c 1 {SW02001} > /tmp/x; cat /tmp/x |",
    "gunzip -c /data/sw02001.sph.gz |",
    SP11_FILE,
])
def test_other_pipes_are_for_the_shell(value):
    pipe = parse_wav_value(value)
    assert isinstance(pipe, Pipe) and pipe.sphere is None


def test_a_file_is_a_file():
    assert parse_wav_value("/data/rec1.wav") == WavFile("/data/rec1.wav")
    assert parse_wav_value(" /data/rec1.flac ") == WavFile("/data/rec1.flac")


def test_unparsable_pipe_is_an_error():
    with pytest.raises(AsrdistError, match="not a shell command"):
        parse_wav_value("sph2pipe -f wav 'unclosed |")


def _executable(folder: Path, name: str, body: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def test_sph2pipe_read_in_process_only_without_its_programs(tmp_path, monkeypatch):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    monkeypatch.setenv("PATH", str(bin_dir))
    assert missing_programs(parse_wav_value(S5C_A)) == [SPH2PIPE]
    assert audio_source(S5C_A) == SphereChannel(SW02001, 1)
    assert audio_source(SP09_A) == SphereChannel(SW02001, 1, 0.9)
    # Kaldi's own tools installed: the pipe runs as Kaldi runs it
    sph2pipe = _executable(tmp_path / "kaldi", "sph2pipe", "exit 0")
    _executable(bin_dir, "sox", "exit 0")
    value = f"{sph2pipe} -f wav -p -c 1 {SW02001} | sox -t wav - -t wav - speed 0.9 |"
    assert isinstance(audio_source(value), Pipe)
    # sox missing: the whole pipe is read in-process
    (bin_dir / "sox").unlink()
    assert audio_source(value) == SphereChannel(SW02001, 1, 0.9)


def test_asrdist_sph2wav_is_always_read_in_process(tmp_path, monkeypatch):
    _executable(tmp_path, "asrdist-sph2wav", "exit 0")
    monkeypatch.setenv("PATH", str(tmp_path))
    assert audio_source(OURS_B_SP) == SphereChannel(SW02001, 2, 1.1)


def test_missing_program_is_named(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(AsrdistError, match="needs 'sox', which is not installed"):
        audio_source(SP11_FILE)
    with pytest.raises(AsrdistError, match="needs 'flac'"):
        audio_source("flac -c -d -s /L/84-121123-0000.flac |")


def test_read_audio_of_a_file_and_of_a_pipe(tmp_path):
    samples = (np.random.default_rng(0).standard_normal((800, 2)) * 1000).astype(np.int16)
    wav = tmp_path / "rec 1.wav"
    soundfile.write(wav, samples, 8000, "PCM_16")
    for value in (str(wav), f"cat '{wav}' |"):
        got, rate = read_audio(audio_source(value))
        assert rate == 8000
        np.testing.assert_array_equal(got, samples[:, 0])  # channel 0, as compute-fbank-feats


def test_read_audio_errors_name_the_command(tmp_path):
    with pytest.raises(AsrdistError, match=r"cannot read audio 'cat /no/such\.wav': exit status 1"):
        read_audio(audio_source("cat /no/such.wav |"))
    bad = tmp_path / "bad.wav"
    bad.write_bytes(b"not a wav")
    with pytest.raises(AsrdistError, match=f"cannot read audio '{bad}'"):
        read_audio(audio_source(str(bad)))


def test_truncated_wav_is_an_error_naming_both_lengths(tmp_path):
    """A wav cut short (a truncated file, ``head -c`` in a pipe) gives less data than its header
    declares: an error naming both sizes, not features of what arrived (Kaldi's reader refuses)."""
    wav = tmp_path / "whole.wav"
    soundfile.write(wav, np.zeros(4000, dtype=np.int16), 16000, "PCM_16")  # 8000 data bytes
    short = tmp_path / "short.wav"
    short.write_bytes(wav.read_bytes()[:44 + 3000])
    for value in (str(short), f"head -c 3044 {wav} |"):
        with pytest.raises(AsrdistError, match=r"is truncated: its wav header declares 8000 "
                                               r"bytes of data, 3000 were read"):
            read_audio(audio_source(value))


def test_stream_mode_wav_is_read_to_its_end(tmp_path):
    """A wav written to a pipe of unknown length (RIFF and data sizes 0xFFFFFFFF) declares no
    length to fall short of: read to its end."""
    samples = np.arange(100, dtype=np.int16)
    wav = tmp_path / "stream.wav"
    soundfile.write(wav, samples, 16000, "PCM_16")
    data = bytearray(wav.read_bytes())
    data[4:8] = data[40:44] = (0xFFFFFFFF).to_bytes(4, "little")
    wav.write_bytes(bytes(data))
    with open(wav, "rb") as f:
        assert wav_data_sizes(f) is None
    got, _ = read_audio(audio_source(f"cat {wav} |"))
    np.testing.assert_array_equal(got, samples)


def _chirp(n: int = 8000, rate: int = 16000) -> np.ndarray:
    """int16 samples of a 100 Hz to 4 kHz chirp with a little noise: energy in every band."""
    t = np.arange(n) / rate
    audio = 12000 * np.sin(2 * np.pi * (100 + 3900 * t / t[-1] / 2) * t)
    audio += 200 * np.random.default_rng(3).standard_normal(n)
    return audio.astype(np.int16)


@pytest.mark.parametrize("subtype", ["FLOAT", "DOUBLE", "PCM_24", "PCM_32"])
def test_every_subtype_reads_on_the_int16_scale(tmp_path, subtype):
    """A float wav (samples in [-1, 1], as sox and librosa write) and 24/32-bit PCM holding the
    same signal give the int16 twin's samples: float times 32768, wider integers scaled down
    (read as int16, a float wav became near-silence)."""
    samples = _chirp()
    twin = tmp_path / "int16.wav"
    soundfile.write(twin, samples, 16000, "PCM_16")
    other = tmp_path / f"{subtype}.wav"
    soundfile.write(other, samples / 32768.0, 16000, subtype)
    expected, _ = read_audio(audio_source(str(twin)))
    np.testing.assert_array_equal(expected, samples)
    for value in (str(other), f"cat {other} |"):
        got, rate = read_audio(audio_source(value))
        assert rate == 16000 and got.dtype == np.float32
        np.testing.assert_array_equal(got, expected)


def test_float_wav_beyond_full_scale_is_read_as_it_is(tmp_path):
    """Float samples past [-1, 1] are kept (no clipping): the audio as it is."""
    wav = tmp_path / "loud.wav"
    soundfile.write(wav, np.array([1.5, -2.0, 0.25], dtype=np.float32), 16000, "FLOAT")
    got, _ = read_audio(audio_source(str(wav)))
    np.testing.assert_array_equal(got, [49152.0, -65536.0, 8192.0])


def test_truncated_mp3_through_a_pipe_is_an_error(tmp_path):
    """An MP3 declares its length only in a Xing/Info frame (libsndfile's encoder writes one):
    a stream cut short decodes to fewer samples than that, an error naming both counts, not
    features of the part that arrived."""
    mp3 = tmp_path / "whole.mp3"
    soundfile.write(mp3, _chirp(43200) / 32768.0, 16000, format="MP3")
    whole, _ = read_audio(audio_source(f"cat {mp3} |"))
    assert len(whole) == 43200
    cut = mp3.stat().st_size * 35 // 100
    with pytest.raises(AsrdistError, match=r"audio 'head -c \d+ .*' is truncated: its header "
                                           r"declares 43200 samples, \d+ were decoded"):
        read_audio(audio_source(f"head -c {cut} {mp3} |"))


def _bare_mp3(mp3: Path) -> bytes:
    """``mp3``'s stream without its first frame, the Xing/Info frame that declares its length."""
    data = mp3.read_bytes()
    return data[data.index(data[:2], 4):]  # the next frame header


def test_mp3_declaring_no_length_is_passed_on_as_unchecked(tmp_path):
    """A bare MP3 (no Xing/Info frame) cannot be told from one cut short: read, and said so
    once, for the caller to warn; one that declares its length says nothing."""
    mp3 = tmp_path / "whole.mp3"
    soundfile.write(mp3, _chirp(43200) / 32768.0, 16000, format="MP3")
    bare = tmp_path / "bare.mp3"
    bare.write_bytes(_bare_mp3(mp3))
    said: list[str] = []
    read_audio(audio_source(str(mp3)), said.append)
    assert said == []
    for value in (str(bare), f"cat {bare} |"):
        got, _ = read_audio(audio_source(value), said.append)
        assert len(got) > 0
    assert len(said) == 2
    assert all("is an MP3 declaring no length (no Xing/Info or VBRI frame)" in s for s in said)


def test_stream_mode_wav_cut_inside_a_sample_frame_is_an_error(tmp_path):
    """A stream-mode wav declares no length, but no writer ends one inside a sample frame:
    a pipe cut there was cut short (libsndfile dropped the partial frame without a word)."""
    stereo = np.arange(200, dtype=np.int16).reshape(100, 2)
    wav = tmp_path / "stream.wav"
    soundfile.write(wav, stereo, 16000, "PCM_16")
    data = bytearray(wav.read_bytes())
    data[4:8] = data[40:44] = (0xFFFFFFFF).to_bytes(4, "little")
    wav.write_bytes(bytes(data))
    whole, _ = read_audio(audio_source(f"cat {wav} |"))
    np.testing.assert_array_equal(whole, stereo[:, 0])
    with pytest.raises(AsrdistError, match=r"audio 'head -c 442 .*' is truncated: a stream-mode "
                                           r"wav \(no length declared\) whose 398 bytes of data "
                                           r"end inside a 4-byte sample frame"):
        read_audio(audio_source(f"head -c 442 {wav} |"))


def test_sox_s_streamed_wav_is_read_to_its_end(tmp_path):
    """sox writing a wav to a pipe it cannot seek on leaves data size 0x7FFFF000 ("Length in
    output .wav header will be wrong"): a stream, read to its end, not refused as truncated."""
    samples = np.arange(100, dtype=np.int16)
    wav = tmp_path / "sox.wav"
    soundfile.write(wav, samples, 16000, "PCM_16")
    data = bytearray(wav.read_bytes())
    data[4:8], data[40:44] = (0x7FFFF024).to_bytes(4, "little"), (0x7FFFF000).to_bytes(4, "little")
    wav.write_bytes(bytes(data))
    got, _ = read_audio(audio_source(f"cat {wav} |"))
    np.testing.assert_array_equal(got, samples)


def test_flac_declaring_no_length_is_one_line(tmp_path):
    """A FLAC stream with no sample count (sox's through a pipe) makes libsndfile count the
    longest file, and fail part way: one line saying so, not a traceback."""
    flac = tmp_path / "stream.flac"
    soundfile.write(flac, _chirp(20000), 16000, "PCM_16", format="FLAC")
    data = bytearray(flac.read_bytes())
    streaminfo = 8  # after "fLaC" and the metadata block's header
    data[streaminfo + 13] &= 0xF0  # the 36-bit total sample count: 0, unknown
    data[streaminfo + 14:streaminfo + 18] = bytes(4)
    flac.write_bytes(bytes(data))
    with pytest.raises(AsrdistError, match=r"cannot read audio 'cat .*': its FLAC header "
                                           r"declares no length, which libsndfile cannot read"):
        read_audio(audio_source(f"cat {flac} |"))
