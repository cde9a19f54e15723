"""LDC SPHERE audio without sph2pipe: shorten-compressed mu-law (Switchboard, eval2000, Fisher).

Kaldi reads these with ``sph2pipe -f wav -p -c N``; lhotse only through the sph2pipe binary,
which it downloads and compiles — impossible on an offline cluster. desphere (PyPI, pure
Python, optional Rust accelerator ``desphere[fast]``) decodes SPHERE with embedded shorten and
expands mu-law to 16-bit PCM, as sph2pipe's ``-p`` does.
"""

from __future__ import annotations

import io
import os

import desphere
import numpy as np
import soundfile

from asrdist.errors import AsrdistError


def read_sphere(path: str | os.PathLike) -> tuple[np.ndarray, int]:
    """(samples x channels int16, sample rate) of a SPHERE file."""
    try:
        with open(path, "rb") as f:
            wav = desphere.transcode_bytes(f.read())
    except OSError as e:
        raise AsrdistError(f"{path}: cannot read SPHERE audio ({e.strerror})") from e
    except desphere.DesphereError as e:
        raise AsrdistError(f"{path}: not decodable SPHERE audio: {e}") from e
    samples, rate = soundfile.read(io.BytesIO(wav), dtype="int16", always_2d=True)
    return samples, rate


def sphere_length(path: str | os.PathLike) -> tuple[int, int]:
    """(samples per channel, sample rate) from a SPHERE header, without decoding the audio."""
    try:
        with open(path, "rb") as f:
            head = f.read(1024)
            if head[:8] != b"NIST_1A\n":
                raise AsrdistError(f"{path}: not a SPHERE file (no NIST_1A header)")
            size = int(head[8:16])
            if size > len(head):
                head += f.read(size - len(head))
    except OSError as e:
        raise AsrdistError(f"{path}: cannot read SPHERE audio ({e.strerror})") from e
    except ValueError:
        raise AsrdistError(f"{path}: not a SPHERE header") from None
    fields = {}
    for line in head[16:].decode("latin-1").splitlines():
        parts = line.split()
        if len(parts) >= 3:
            fields[parts[0]] = parts[2]
    try:
        return int(fields["sample_count"]), int(fields["sample_rate"])
    except (KeyError, ValueError):
        raise AsrdistError(f"{path}: SPHERE header without sample_count and sample_rate") from None


def change_speed(samples: np.ndarray, factor: float) -> np.ndarray:
    """Kaldi's speed perturbation (sox ``speed``): play ``factor`` times faster, same rate.

    The signal is resampled by linear interpolation to ``len / factor`` samples, which moves
    pitch and tempo together as sox does; a 0.9 copy is 1/0.9 times as long.
    """
    if factor <= 0:
        raise AsrdistError(f"speed factor must be positive, got {factor}")
    n = int(len(samples) / factor)
    pos = np.arange(n) * factor
    out = np.interp(pos, np.arange(len(samples)), samples.astype(np.float64))
    return np.clip(np.round(out), -32768, 32767).astype(np.int16)


def channel_wav(path: str | os.PathLike, channel: int, speed: float = 1.0) -> bytes:
    """One channel (1-based, as sph2pipe's -c) of a SPHERE file as 16-bit wav bytes."""
    samples, rate = read_sphere(path)
    if not 1 <= channel <= samples.shape[1]:
        raise AsrdistError(f"{path}: has {samples.shape[1]} channel(s), asked for {channel}")
    mono = samples[:, channel - 1]
    if speed != 1.0:
        mono = change_speed(mono, speed)
    buf = io.BytesIO()
    soundfile.write(buf, mono, rate, format="WAV", subtype="PCM_16")
    return buf.getvalue()
