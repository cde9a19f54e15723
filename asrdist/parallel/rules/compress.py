"""Codecs for what crosses the wire, and error feedback for the lossy ones.

A codec turns a flat float vector into the bytes a learner sends (one ``uint8`` tensor of
exactly :meth:`Codec.wire_bytes` bytes, scales included) and back, so the bytes a transport
counts are the bytes it moves. The codecs (``--compress``):

- ``none``: float32, lossless (the strategies do not call a codec at all then).
- ``bf16``, ``fp16``: a cast, as torch's ``bf16_compress_hook`` / ``fp16_compress_hook``.
- ``int8``: blockwise absmax scaling (INTELLECT-1's int8 all-reduce, torchft's row-wise
  quantized collectives): per block of ``block`` values ``s = max|x| / 127``,
  ``q = round(x / s)`` (half to even) in [-127, 127], decoded ``q * s``; a block of zeros has
  ``s = 0``.
- ``fp8``: per block ``s = max|x| / 448`` and ``q = float8_e4m3fn(x / s)`` (round to nearest
  even), decoded ``float(q) * s``.
- ``1bit``: the sign, one bit per value (``x >= 0`` is +), with the block's mean ``|x|`` as
  its magnitude: decoded ``+-s`` (1-bit SGD, Seide et al., Interspeech 2014, whose error
  feedback makes it work; the per-block mean-abs scale is EF-SignSGD's).

The scales travel as float32 before the values. The last block may be short.

:class:`ErrorFeedback` keeps what a lossy codec lost and adds it to the next vector it sends
(Seide et al.'s "quantization error feedback"): it sends ``C(x + r)`` and keeps
``r <- (x + r) - D(C(x + r))``, so nothing is lost for good, only delayed. Its residual is
resume state (:meth:`ErrorFeedback.state_dict`).
"""

from __future__ import annotations

import math
import threading
from typing import Any

import torch

from asrdist.errors import AsrdistError

BLOCK = 256  # values per scale: 4 bytes of scale per 256 int8 bytes, 1.6 %
CODECS = ("none", "bf16", "fp16", "int8", "fp8", "1bit")


def _bytes(t: torch.Tensor) -> torch.Tensor:
    """``t``'s memory as a flat uint8 tensor."""
    return t.contiguous().reshape(-1).view(torch.uint8)


class Codec:
    """Encode a flat float vector to its wire bytes and decode them back (float32)."""

    name = "none"
    lossy = False

    def __init__(self, block: int = BLOCK) -> None:
        if block < 1:
            raise AsrdistError(f"a codec's block must be positive, got {block}")
        self.block = block

    def encode(self, x: torch.Tensor) -> torch.Tensor:
        """The bytes sent for flat vector ``x`` (uint8, ``wire_bytes(x.numel())`` long)."""
        return _bytes(x.detach().to(torch.float32).clone())

    def decode(self, payload: torch.Tensor, numel: int) -> torch.Tensor:
        """The float32 vector of ``numel`` values that ``payload`` carries."""
        return payload.view(torch.float32)[:numel].clone()

    def wire_bytes(self, numel: int) -> int:
        """The exact bytes of a vector of ``numel`` values on the wire, scales included."""
        return 4 * numel

    def roundtrip(self, x: torch.Tensor) -> torch.Tensor:
        """``decode(encode(x))``: what the receiver gets for ``x``."""
        return self.decode(self.encode(x), x.numel())

    def blocks(self, numel: int) -> int:
        return math.ceil(numel / self.block)


class Cast(Codec):
    """A cast to a 16-bit float type."""

    def __init__(self, name: str, dtype: torch.dtype, block: int = BLOCK) -> None:
        super().__init__(block)
        self.name, self.dtype, self.lossy = name, dtype, True

    def encode(self, x: torch.Tensor) -> torch.Tensor:
        return _bytes(x.detach().to(self.dtype))

    def decode(self, payload: torch.Tensor, numel: int) -> torch.Tensor:
        return payload.view(self.dtype)[:numel].to(torch.float32)

    def wire_bytes(self, numel: int) -> int:
        return 2 * numel


class Blockwise(Codec):
    """Per-block float32 scales, then the values at one byte (or bit) each."""

    lossy = True
    dtype: torch.dtype  # one value's type on the wire (the subclasses that decode here)

    def _padded(self, x: torch.Tensor) -> torch.Tensor:
        """``x`` as (blocks, block) float32, zero-padded (zeros change no absmax)."""
        x = x.detach().reshape(-1).to(torch.float32)
        pad = self.blocks(x.numel()) * self.block - x.numel()
        if pad:
            x = torch.cat([x, x.new_zeros(pad)])
        return x.view(-1, self.block)

    def _split(self, payload: torch.Tensor, numel: int) -> tuple[torch.Tensor, torch.Tensor]:
        """The scales (blocks, 1) and the value bytes of ``payload``."""
        nb = self.blocks(numel)
        return payload[: 4 * nb].view(torch.float32).view(nb, 1), payload[4 * nb:]

    def decode(self, payload: torch.Tensor, numel: int) -> torch.Tensor:
        scale, body = self._split(payload, numel)
        q = body.view(self.dtype).to(torch.float32)
        pad = scale.shape[0] * self.block - numel
        q = torch.cat([q, q.new_zeros(pad)]).view(-1, self.block)
        return (q * scale).reshape(-1)[:numel]

    def wire_bytes(self, numel: int) -> int:
        return 4 * self.blocks(numel) + numel


class Int8(Blockwise):
    name = "int8"
    dtype = torch.int8

    def encode(self, x: torch.Tensor) -> torch.Tensor:
        xb = self._padded(x)
        scale = xb.abs().amax(dim=1, keepdim=True) / 127.0
        q = torch.round(xb / torch.where(scale > 0, scale, 1.0)).clamp_(-127, 127)
        return torch.cat([_bytes(scale), _bytes(q.to(torch.int8))[: x.numel()]])


class FP8(Blockwise):
    name = "fp8"
    dtype = torch.float8_e4m3fn
    top = 448.0  # float8_e4m3fn's largest finite value

    def encode(self, x: torch.Tensor) -> torch.Tensor:
        xb = self._padded(x)
        scale = xb.abs().amax(dim=1, keepdim=True) / self.top
        q = (xb / torch.where(scale > 0, scale, 1.0)).to(torch.float8_e4m3fn)
        return torch.cat([_bytes(scale), _bytes(q)[: x.numel()]])


_BITS = (128, 64, 32, 16, 8, 4, 2, 1)


class OneBit(Blockwise):
    """Signs packed 8 to a byte, most significant bit first; the block's mean |x| each."""

    name = "1bit"

    def encode(self, x: torch.Tensor) -> torch.Tensor:
        numel = x.numel()
        xb = self._padded(x)
        real = torch.arange(xb.numel(), device=xb.device).view_as(xb) < numel
        count = real.sum(dim=1, keepdim=True).clamp_(min=1).to(torch.float32)
        scale = xb.abs().sum(dim=1, keepdim=True) / count
        signs = (xb.reshape(-1)[:numel] >= 0).to(torch.uint8)
        pad = -numel % 8
        if pad:
            signs = torch.cat([signs, signs.new_zeros(pad)])
        weights = torch.tensor(_BITS, dtype=torch.uint8, device=x.device)
        packed = (signs.view(-1, 8) * weights).sum(dim=1).to(torch.uint8)
        return torch.cat([_bytes(scale), packed])

    def decode(self, payload: torch.Tensor, numel: int) -> torch.Tensor:
        scale, body = self._split(payload, numel)
        weights = torch.tensor(_BITS, dtype=torch.uint8, device=payload.device)
        bits = (body.view(-1, 1).bitwise_and(weights) > 0).reshape(-1)
        nb = scale.shape[0]
        bits = torch.cat([bits, bits.new_zeros(max(0, nb * self.block - bits.numel()))])
        sign = bits[: nb * self.block].to(torch.float32).mul_(2.0).sub_(1.0).view(nb, -1)
        return (sign * scale).reshape(-1)[:numel]

    def wire_bytes(self, numel: int) -> int:
        return 4 * self.blocks(numel) + math.ceil(numel / 8)


def make_codec(name: str, block: int = BLOCK) -> Codec:
    """The codec ``name`` (one of :data:`CODECS`); ``block``: values per scale of the
    blockwise ones."""
    if name == "none":  # no scales: a chunk of a compressed mean needs no whole blocks
        return Codec(1)
    if name == "bf16":
        return Cast("bf16", torch.bfloat16, 1)
    if name == "fp16":
        return Cast("fp16", torch.float16, 1)
    kinds: dict[str, type[Codec]] = {"int8": Int8, "fp8": FP8, "1bit": OneBit}
    if name not in kinds:
        raise AsrdistError(f"--compress {name!r}: choose one of {', '.join(CODECS)}")
    return kinds[name](block)


class ErrorFeedback:
    """One sender's error feedback for ``codec``: what it lost so far (``residual``) is added
    to what it sends next. ``enabled=False`` (or a lossless codec): plain encoding. Safe to
    share between threads (an ADPSGD learner's exchange threads, old and new, in an elastic
    run; the checkpoint's read)."""

    def __init__(self, codec: Codec, enabled: bool = True) -> None:
        self.codec = codec
        self.enabled = enabled and codec.lossy
        self.residual: torch.Tensor | None = None
        self._lock = threading.Lock()

    def compress(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The payload sent for ``x`` (flat) and what the receivers decode from it (float32);
        the residual becomes what that lost of ``x`` plus the old residual."""
        x = x.detach().reshape(-1).to(torch.float32)
        with self._lock:
            if self.enabled and self.residual is not None:
                x = x + self.residual.to(x.device)
            payload = self.codec.encode(x)
            decoded = self.codec.decode(payload, x.numel())
            if self.enabled:
                self.residual = x - decoded
        return payload, decoded

    def state_dict(self) -> dict[str, Any]:
        with self._lock:
            return {"residual": None if self.residual is None else self.residual.clone()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        with self._lock:
            self.residual = state.get("residual")


class CompressedMean:
    """One learner's side of the mean of a flat vector over ``learners`` learners with every
    message compressed by ``codec``: a reduce-scatter then an all-gather, as torchft's and
    INTELLECT-1's quantized allreduces do, so each learner sends ``2 (n - 1)`` chunk payloads,
    a ring allreduce's bytes at the codec's size.

    The vector (zero-padded to ``n`` equal chunks of whole blocks) is sent chunk ``j`` to
    learner ``j`` (:meth:`outgoing`); learner ``j`` decodes the ``n`` chunks it got, averages
    them in rank order and encodes the mean chunk (:meth:`reduce`); every learner decodes the
    ``n`` mean chunks (:meth:`gather`), so all hold the same result. Error feedback runs at
    both compressions: ``sent`` over this learner's whole vector, ``owned`` over the mean
    chunk it owns. The transports move the payloads; this class holds all the maths, so the
    processes and the simulator compute the same bits. Both residuals change under their
    :class:`ErrorFeedback`'s lock: a started mean runs on a communication thread."""

    def __init__(self, codec: Codec, learners: int, rank: int,
                 error_feedback: bool = True) -> None:
        self.codec, self.learners, self.rank = codec, learners, rank
        self.sent = ErrorFeedback(codec, error_feedback)
        self.owned = ErrorFeedback(codec, error_feedback)

    def chunk(self, numel: int) -> int:
        """Values per chunk: whole blocks, ``learners`` chunks covering ``numel``."""
        per = math.ceil(numel / self.learners)
        return max(1, math.ceil(per / self.codec.block)) * self.codec.block

    def outgoing(self, x: torch.Tensor) -> list[torch.Tensor]:
        """The payload of ``x``'s chunk for each learner, by rank (error feedback applied)."""
        x = x.detach().reshape(-1).to(torch.float32)
        c = self.chunk(x.numel())
        padded = torch.cat([x, x.new_zeros(c * self.learners - x.numel())])
        with self.sent._lock:  # a started mean runs this on a communication thread
            if self.sent.enabled and self.sent.residual is not None:
                padded = padded + self.sent.residual.to(padded.device)
            payloads = [self.codec.encode(padded[j * c: (j + 1) * c])
                        for j in range(self.learners)]
            if self.sent.enabled:
                decoded = torch.cat([self.codec.decode(p, c) for p in payloads])
                self.sent.residual = padded - decoded
        return payloads

    def reduce(self, incoming: list[torch.Tensor], numel: int) -> torch.Tensor:
        """The payload of the mean of this learner's chunk, from every learner's (by rank)."""
        c = self.chunk(numel)
        total = self.codec.decode(incoming[0], c)
        for p in incoming[1:]:
            total = total + self.codec.decode(p, c)
        payload, _ = self.owned.compress(total / self.learners)
        return payload

    def gather(self, chunks: list[torch.Tensor], numel: int) -> torch.Tensor:
        """The mean vector (float32, ``numel`` values) from every learner's mean chunk."""
        c = self.chunk(numel)
        return torch.cat([self.codec.decode(p, c) for p in chunks])[:numel]

    def sent_bytes(self, numel: int) -> int:
        """What this learner sends for a mean of ``numel`` values: one chunk payload to each
        other learner in each phase."""
        return 2 * (self.learners - 1) * self.codec.wire_bytes(self.chunk(numel))

    def wire_bytes(self, numel: int) -> int:
        """What the whole padded vector takes at the codec's size: a ring allreduce of that
        many bytes sends what this learner sends (``2 (n - 1) / n`` of it)."""
        return self.learners * self.codec.wire_bytes(self.chunk(numel))

    def state_dict(self) -> dict[str, Any]:
        return {"sent": self.sent.state_dict(), "owned": self.owned.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.sent.load_state_dict(state.get("sent", {}))
        self.owned.load_state_dict(state.get("owned", {}))


def compressed_mean(vectors: list[torch.Tensor], sides: list[CompressedMean]) -> torch.Tensor:
    """The mean every learner gets from :class:`CompressedMean` when learner ``r`` brings
    ``vectors[r]`` with side ``sides[r]``: the simulator's collective, the same maths as the
    processes' (their messages moved by hand)."""
    numel = vectors[0].numel()
    out = [s.outgoing(v) for s, v in zip(sides, vectors, strict=True)]
    mids = [s.reduce([o[j] for o in out], numel) for j, s in enumerate(sides)]
    return sides[0].gather(mids, numel)


class GradientCompression:
    """ssgd's ``--compress`` on the gradient mean, as the rules see it: the precision a cast
    sends in (``bf16``/``fp16``), or the :class:`CompressedMean` that averages the whole flat
    gradient after backward with error feedback (``int8``/``fp8``/``1bit``), and its resume
    state. A transport makes it (:meth:`~asrdist.parallel.transport.Transport.
    gradient_compression`): the processes' adds the DDP hooks and torch's PowerSGD."""

    def __init__(self, name: str, learners: int, rank: int, error_feedback: bool = True,
                 powersgd_rank: int = 1) -> None:
        self.name, self.learners = name, learners
        self.error_feedback, self.powersgd_rank = error_feedback, powersgd_rank
        self.cast = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(name)
        self.side = None if name in ("bf16", "fp16", "powersgd") else \
            CompressedMean(make_codec(name), learners, rank, error_feedback)

    def wire_bytes(self, numel: int) -> int:
        """The bytes allreduced for a gradient of ``numel`` values in one step."""
        if self.side is not None:
            return self.side.wire_bytes(numel)
        return (2 if self.cast is not None else 4) * numel

    def state_dict(self) -> dict[str, Any]:
        return {} if self.side is None else self.side.state_dict()

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if self.side is not None:
            self.side.load_state_dict(state)
