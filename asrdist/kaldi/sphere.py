"""LDC SPHERE audio as Kaldi's ``sph2pipe -f wav -p -c N`` gives it, without sph2pipe.

Switchboard, eval2000 and Fisher ship two-channel 8 kHz mu-law SPHERE files with embedded
shorten compression; sph2pipe is not on an offline cluster (lhotse only downloads and compiles
it). The decoder is desphere-native (PyPI, a Rust extension, wheels for Linux, macOS and
Windows): shorten and mu-law expanded to 16-bit PCM, as sph2pipe's ``-p`` does, in about 0.1
CPU s per minute of two-channel audio (bench/results/audio_throughput.md). Where it cannot
be installed, pure-Python desphere gives the same samples bit for bit, some 13x slower
(``FALLBACK_WARNING``).
"""

from __future__ import annotations

import io
import os

import desphere
import numpy as np
import soundfile

from asrdist.errors import AsrdistError

try:
    import desphere_native
except ImportError:  # no wheel for this platform: pure-Python desphere decodes
    desphere_native = None

_SPEED_BLOCK = 1 << 16  # output samples per block of change_speed
FALLBACK_WARNING = ("desphere-native is not installed: SPHERE audio is decoded by pure-Python "
                    "desphere, tens of times slower (pip install desphere-native)")


def native_decoder() -> bool:
    """Whether SPHERE files are decoded by desphere-native (else by pure-Python desphere)."""
    return desphere_native is not None


def _read_bytes(path: str | os.PathLike, size: int = -1) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read(size)
    except OSError as e:
        raise AsrdistError(f"{path}: cannot read SPHERE audio ({e.strerror})") from e


def _header(path: str | os.PathLike, data: bytes) -> dict[str, str]:
    """The header's fields (name -> value) of a SPHERE file starting with ``data``."""
    if data[:8] != b"NIST_1A\n":
        raise AsrdistError(f"{path}: not a SPHERE file (no NIST_1A header)")
    try:
        size = int(data[8:16])
    except ValueError:
        raise AsrdistError(f"{path}: not a SPHERE header") from None
    if size > len(data):
        data += _read_bytes(path, size)[len(data):]
    fields = {}
    for line in data[16:size].decode("latin-1").splitlines():
        parts = line.split()
        if len(parts) >= 3:
            fields[parts[0]] = parts[2]
    return fields


def read_sphere(path: str | os.PathLike) -> tuple[np.ndarray, int]:
    """(samples x channels int16, sample rate) of a SPHERE file: the whole file, decoded once."""
    data = _read_bytes(path)
    if desphere_native is None:
        return _read_pure_python(path, data)
    fields = _header(path, data)
    try:
        channels, rate = int(fields.get("channel_count", "1")), int(fields["sample_rate"])
        pcm = desphere_native.decode_pcm(data)
    except (KeyError, ValueError) as e:
        raise AsrdistError(f"{path}: not decodable SPHERE audio: {e}") from e
    if fields.get("sample_n_bytes", "2") not in ("1", "2") or len(pcm) % (2 * channels):
        return _read_pure_python(path, data)  # 32-bit PCM: soundfile makes it 16-bit
    return np.frombuffer(pcm, dtype="<i2").reshape(-1, channels), rate


def _read_pure_python(path: str | os.PathLike, data: bytes) -> tuple[np.ndarray, int]:
    try:
        wav = desphere.transcode_bytes(data)
    except desphere.DesphereError as e:
        raise AsrdistError(f"{path}: not decodable SPHERE audio: {e}") from e
    samples, rate = soundfile.read(io.BytesIO(wav), dtype="int16", always_2d=True)
    return samples, rate


def sphere_length(path: str | os.PathLike) -> tuple[int, int]:
    """(samples per channel, sample rate) from a SPHERE header, without decoding the audio."""
    fields = _header(path, _read_bytes(path, 1024))
    try:
        return int(fields["sample_count"]), int(fields["sample_rate"])
    except (KeyError, ValueError):
        raise AsrdistError(f"{path}: SPHERE header without sample_count and sample_rate") from None


def change_speed(samples: np.ndarray, factor: float) -> np.ndarray:
    """Kaldi's speed perturbation (sox ``speed``): play ``factor`` times faster, same rate.

    The signal is resampled by linear interpolation to ``len / factor`` samples, which moves
    pitch and tempo together as sox does; a 0.9 copy is 1/0.9 times as long. It is not sox's
    band-limited resampler: the samples differ a little from sox's, mostly above 3 kHz.
    Made in blocks, so a conversation side's copy needs no float64 copies of the whole side.
    """
    if factor <= 0:
        raise AsrdistError(f"speed factor must be positive, got {factor}")
    n = int(len(samples) / factor)
    out = np.empty(n, dtype=np.int16)
    last = len(samples) - 1
    for start in range(0, n, _SPEED_BLOCK):
        pos = np.minimum(np.arange(start, min(start + _SPEED_BLOCK, n)) * factor, last)
        left = np.minimum(pos.astype(np.int64), max(last - 1, 0))
        x0 = samples[left].astype(np.float64)
        x1 = samples[np.minimum(left + 1, last)].astype(np.float64)
        out[start:start + len(pos)] = np.clip(np.round(x0 + (x1 - x0) * (pos - left)),
                                              -32768, 32767)
    return out


def sphere_channel(path: str | os.PathLike, samples: np.ndarray, channel: int) -> np.ndarray:
    """Channel ``channel`` (1-based, as sph2pipe's -c) of ``path``'s decoded ``samples``."""
    if not 1 <= channel <= samples.shape[1]:
        raise AsrdistError(f"{path}: has {samples.shape[1]} channel(s), asked for {channel}")
    return samples[:, channel - 1]


def channel_wav(path: str | os.PathLike, channel: int, speed: float = 1.0) -> bytes:
    """One channel (1-based, as sph2pipe's -c) of a SPHERE file as 16-bit wav bytes."""
    samples, rate = read_sphere(path)
    mono = sphere_channel(path, samples, channel)
    if speed != 1.0:
        mono = change_speed(mono, speed)
    buf = io.BytesIO()
    soundfile.write(buf, mono, rate, format="WAV", subtype="PCM_16")
    return buf.getvalue()
