"""SPHERE decoding: desphere-native, and pure-Python desphere where it is not installed."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from asrdist.errors import AsrdistError
from asrdist.kaldi.sphere import (
    FALLBACK_WARNING,
    change_speed,
    channel_wav,
    native_decoder,
    read_sphere,
    sphere_channel,
    sphere_length,
)
from asrdist.testing.sphere_writer import mulaw_decode, mulaw_encode, write_sphere


def _conversation(n: int = 12345) -> np.ndarray:
    rng = np.random.default_rng(5)
    t = np.arange(n) / 8000
    a = 6000 * np.sin(2 * np.pi * 300 * t) + rng.normal(0, 500, n)
    b = np.where(t > 0.5, rng.normal(0, 2000, n), 0)  # a silent start: shorten's ZERO blocks
    return np.stack([a, b], 1).astype(np.int16)


def _pcm_sphere(path: Path, samples: np.ndarray, rate: int = 16000) -> None:
    """An uncompressed 16-bit little-endian SPHERE file (WSJ's coding, without shorten)."""
    fields = [f"sample_count -i {samples.shape[0]}", f"sample_rate -i {rate}",
              f"channel_count -i {samples.shape[1]}", "sample_n_bytes -i 2",
              "sample_byte_format -s2 01", "sample_coding -s3 pcm", "end_head"]
    header = ("NIST_1A\n   1024\n" + "\n".join(fields) + "\n").encode().ljust(1024, b" ")
    path.write_bytes(header + samples.astype("<i2").tobytes())


def test_native_decoder_is_the_dependency():
    assert native_decoder()


def test_shorten_mulaw_two_channels(tmp_path):
    x = _conversation()
    write_sphere(tmp_path / "sw.sph", x)
    samples, rate = read_sphere(tmp_path / "sw.sph")
    assert rate == 8000 and samples.dtype == np.int16
    np.testing.assert_array_equal(samples, mulaw_decode(mulaw_encode(x)))  # sph2pipe -p
    assert sphere_length(tmp_path / "sw.sph") == (len(x), 8000)
    np.testing.assert_array_equal(sphere_channel("sw.sph", samples, 2), samples[:, 1])
    with pytest.raises(AsrdistError, match="sw.sph: has 2 channel"):
        sphere_channel("sw.sph", samples, 3)


def test_uncompressed_pcm(tmp_path):
    x = _conversation(3000)[:, :1]
    _pcm_sphere(tmp_path / "wsj.wv1", x)
    samples, rate = read_sphere(tmp_path / "wsj.wv1")
    assert rate == 16000
    np.testing.assert_array_equal(samples, x)


def test_pure_python_fallback_decodes_the_same(tmp_path):
    """desphere-native made unimportable in a fresh process, as on a platform without it."""
    x = _conversation()
    write_sphere(tmp_path / "sw.sph", x)
    code = ("import sys; sys.modules['desphere_native'] = None\n"
            "import numpy as np\n"
            "from asrdist.kaldi.sphere import native_decoder, read_sphere\n"
            "assert not native_decoder()\n"
            "np.save(sys.argv[2], read_sphere(sys.argv[1])[0])\n")
    proc = subprocess.run([sys.executable, "-c", code, tmp_path / "sw.sph", tmp_path / "x.npy"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    np.testing.assert_array_equal(np.load(tmp_path / "x.npy"), mulaw_decode(mulaw_encode(x)))
    assert "desphere-native" in FALLBACK_WARNING


def test_bad_files_are_named(tmp_path):
    with pytest.raises(AsrdistError, match="nope.sph: cannot read SPHERE audio"):
        read_sphere(tmp_path / "nope.sph")
    (tmp_path / "a.sph").write_bytes(b"RIFF....")
    with pytest.raises(AsrdistError, match="a.sph: not a SPHERE file"):
        read_sphere(tmp_path / "a.sph")
    write_sphere(tmp_path / "cut.sph", _conversation())
    data = (tmp_path / "cut.sph").read_bytes()
    (tmp_path / "cut.sph").write_bytes(data[:len(data) // 2])
    with pytest.raises(AsrdistError, match="cut.sph: not decodable SPHERE audio"):
        read_sphere(tmp_path / "cut.sph")


def test_channel_wav_is_a_16_bit_wav_of_the_channel(tmp_path):
    x = _conversation()
    write_sphere(tmp_path / "sw.sph", x)
    wav = channel_wav(tmp_path / "sw.sph", 2)
    assert wav[:4] == b"RIFF" and wav[8:12] == b"WAVE"
    pcm = np.frombuffer(wav[44:], dtype="<i2")
    np.testing.assert_array_equal(pcm, mulaw_decode(mulaw_encode(x))[:, 1])


def test_change_speed_is_linear_interpolation():
    x = np.array([0, 100, 200, 300], dtype=np.int16)
    np.testing.assert_array_equal(change_speed(x, 2.0), [0, 200])
    np.testing.assert_array_equal(change_speed(x, 0.5), [0, 50, 100, 150, 200, 250, 300, 300])
    np.testing.assert_array_equal(change_speed(np.array([-32768, 32767], np.int16), 0.5),
                                  [-32768, 0, 32767, 32767])  # -0.5 rounds half to even
    long = (np.random.default_rng(3).standard_normal(150001) * 9000).astype(np.int16)
    for factor in (0.9, 1.1):  # across its blocks: numpy's interp of the same positions
        n = int(len(long) / factor)
        want = np.interp(np.arange(n) * factor, np.arange(len(long)), long.astype(np.float64))
        np.testing.assert_array_equal(change_speed(long, factor), np.round(want))
    with pytest.raises(AsrdistError, match="speed factor must be positive"):
        change_speed(x, 0.0)
