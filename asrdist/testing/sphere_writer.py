"""Writing LDC-style SPHERE files for fixtures: two-channel 8 kHz mu-law, shorten-compressed.

No shorten encoder can be installed here, so this is a small one of our own, following
Robinson's shorten v2 bitstream (CUED/F-INFENG/TR.156): magic ``ajkg``, version 2, Rice-coded
header fields, then per block a function code (DIFF0/1/2 fixed predictors or ZERO) with
Rice-coded residuals, channels interleaved block by block, a BLOCKSIZE command before a short
last block, QUIT. Sample type 8 is shorten's lossless mu-law mode: each mu-law byte is coded as
its rank in mu-law order (255 - b for b >= 128, b - 128 below). The project's decoder is
desphere, so a file from here that desphere reads back bit-exactly is a valid fixture.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

TYPE_ULAW = 8
FN_DIFF0, FN_DIFF1, FN_DIFF2, FN_QUIT, FN_BLOCKSIZE, FN_ZERO = 0, 1, 2, 4, 5, 8
BLOCKSIZE = 256


def mulaw_encode(samples: np.ndarray) -> np.ndarray:
    """G.711 mu-law bytes of int16 samples."""
    s = samples.astype(np.int32)
    sign = np.where(s < 0, 0x80, 0)
    mag = np.minimum(np.abs(s), 32635) + 0x84
    exponent = np.clip(np.floor(np.log2(mag >> 7)).astype(np.int32), 0, 7)
    mantissa = (mag >> (exponent + 3)) & 0x0F
    return (~(sign | (exponent << 4) | mantissa) & 0xFF).astype(np.uint8)


def mulaw_decode(codes: np.ndarray) -> np.ndarray:
    """int16 samples of G.711 mu-law bytes (what sph2pipe -p writes)."""
    u = (~codes.astype(np.int32)) & 0xFF
    exponent, mantissa = (u >> 4) & 0x07, u & 0x0F
    mag = (((mantissa << 3) + 0x84) << exponent) - 0x84
    return np.where(u & 0x80, -mag, mag).astype(np.int16)


class _Bits:
    def __init__(self) -> None:
        self.bits: list[int] = []

    def uvar(self, value: int, k: int) -> None:
        """Rice code: value >> k in unary (zeros, then a one), then k low bits."""
        self.bits.extend([0] * (value >> k) + [1])
        self.bits.extend((value >> i) & 1 for i in range(k - 1, -1, -1))

    def ulong(self, value: int) -> None:
        k = max(value.bit_length(), 1)
        self.uvar(k, 2)
        self.uvar(value, k)

    def svar(self, value: int, k: int) -> None:
        self.uvar(2 * value if value >= 0 else -2 * value - 1, k)

    def tobytes(self) -> bytes:
        bits = self.bits + [0] * (-len(self.bits) % 8)
        return np.packbits(np.array(bits, dtype=np.uint8)).tobytes()


def _residuals(block: list[int], hist: list[int], fn: int) -> list[int]:
    p1, p2 = hist[-1], hist[-2]
    out = []
    for v in block:
        pred = 0 if fn == FN_DIFF0 else p1 if fn == FN_DIFF1 else 2 * p1 - p2
        out.append(v - pred)
        p2, p1 = p1, v
    return out


def shorten_ulaw(codes: np.ndarray) -> bytes:
    """A shorten v2 stream (type 8) of mu-law bytes, shape (samples, channels)."""
    ranks = np.where(codes >= 128, 255 - codes.astype(np.int32), codes.astype(np.int32) - 128)
    n, nchan = ranks.shape
    out = _Bits()
    for value in (TYPE_ULAW, nchan, BLOCKSIZE, 0, 0, 0):  # type, nchan, blocksize, lpc, mean, skip
        out.ulong(value)
    hist = [[0, 0, 0] for _ in range(nchan)]
    size = BLOCKSIZE
    for start in range(0, n, BLOCKSIZE):
        if n - start < size:
            size = n - start
            out.uvar(FN_BLOCKSIZE, 2)
            out.ulong(size)
        for c in range(nchan):
            block = ranks[start:start + size, c].tolist()
            if not any(block):
                out.uvar(FN_ZERO, 2)
            else:
                fn, res = min(((f, _residuals(block, hist[c], f))
                               for f in (FN_DIFF0, FN_DIFF1, FN_DIFF2)),
                              key=lambda x: sum(abs(r) for r in x[1]))
                mean = sum(abs(r) for r in res) / len(res)
                k = max(int(np.log2(mean + 1)), 1)  # Rice parameter = energy + 1
                out.uvar(fn, 2)
                out.uvar(k - 1, 3)
                for r in res:
                    out.svar(r, k)
            hist[c] = (hist[c] + block)[-3:]
    out.uvar(FN_QUIT, 2)
    return b"ajkg\x02" + out.tobytes()


def write_sphere(path: str | Path, samples: np.ndarray, rate: int = 8000) -> None:
    """LDC97S62-style SPHERE: int16 (samples, channels) -> mu-law, embedded shorten."""
    codes = mulaw_encode(samples)
    fields = [
        f"sample_count -i {samples.shape[0]}",
        f"sample_rate -i {rate}",
        f"channel_count -i {samples.shape[1]}",
        "sample_n_bytes -i 1",
        "sample_byte_format -s1 1",
        "sample_sig_bits -i 8",
        "sample_coding -s26 ulaw,embedded-shorten-v2.00",
        "end_head",
    ]
    header = ("NIST_1A\n   1024\n" + "\n".join(fields) + "\n").encode()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_bytes(header.ljust(1024, b" ") + shorten_ulaw(codes))
