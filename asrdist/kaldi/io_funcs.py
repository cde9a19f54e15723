"""Kaldi's object serialisation (tokens, basic types, vectors, matrices), binary and text.

Kaldi objects (final.mdl, ark entries) are sequences of these primitives; reading and writing
them here lets the toolkit exchange files with Kaldi without Kaldi binaries. Layouts follow
Kaldi's base/io-funcs and matrix/kaldi-{vector,matrix} Write/Read:

- binary stream: starts with ``\\0B``; a token is its text plus one space; an int32 is the byte
  4 (its size; -4 for unsigned) then 4 little-endian bytes; a float is the byte 4 then an IEEE
  float32 (8 and a double are accepted on read); an integer vector (WriteIntegerVector) is the
  byte 4, an int32 count, then the raw values; a float vector is ``FV `` (or ``DV ``), an int32
  count and the raw values; a matrix is ``FM ``/``DM ``, rows, cols, raw row-major values.
- text stream: everything is whitespace-separated; floats are printed with 7 significant digits
  (Kaldi's output precision); vectors are `` [ a b c ]\\n``; matrices `` [\\n  a b \\n  c d ]\\n``.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

import numpy as np

from asrdist.errors import AsrdistError

BINARY_HEADER = b"\0B"
_WHITESPACE = b" \t\n\r\v\f"


class KaldiReader:
    """Sequential reader over one Kaldi object stream held in memory.

    Errors name ``name`` (the file) and the byte offset, so a bad file is found quickly.
    """

    def __init__(self, data: bytes, name: str, binary: bool | None = None, pos: int = 0):
        self.data = data
        self.name = name
        self.pos = pos
        if binary is None:
            binary = data.startswith(BINARY_HEADER, pos)
            if binary:
                self.pos += len(BINARY_HEADER)
        self.binary = binary

    # ---- helpers -------------------------------------------------------------------------
    def fail(self, what: str) -> AsrdistError:
        """An error naming the file and the current offset (returned, for ``raise``)."""
        return AsrdistError(f"{self.name}: {what} (at byte {self.pos})")

    def at_end(self) -> bool:
        """True when only whitespace remains (text) or nothing remains (binary)."""
        if self.binary:
            return self.pos >= len(self.data)
        return not self.data[self.pos :].strip()

    def _skip_ws(self) -> None:
        data, pos, n = self.data, self.pos, len(self.data)
        while pos < n and data[pos] in _WHITESPACE:
            pos += 1
        self.pos = pos

    def _word(self) -> bytes:
        """The next whitespace-delimited word (text mode, and tokens in both modes)."""
        self._skip_ws()
        start = self.pos
        data, n = self.data, len(self.data)
        end = start
        while end < n and data[end] not in _WHITESPACE:
            end += 1
        if end == start:
            raise self.fail("unexpected end of file")
        self.pos = end
        return data[start:end]

    def _take(self, n: int, what: str) -> bytes:
        if self.pos + n > len(self.data):
            raise self.fail(f"unexpected end of file while reading {what}")
        chunk = self.data[self.pos : self.pos + n]
        self.pos += n
        return chunk

    # ---- tokens --------------------------------------------------------------------------
    def read_token(self) -> str:
        """Read a token such as ``<TransitionModel>`` (and its trailing space in binary)."""
        word = self._word()
        if self.binary:
            if self.pos >= len(self.data) or self.data[self.pos] != 0x20:
                raise self.fail(f"expected a space after token {word[:20]!r}")
            self.pos += 1
        try:
            return word.decode("ascii")
        except UnicodeDecodeError:
            raise self.fail(f"expected a token, got bytes {word[:20]!r}") from None

    def peek_token(self) -> str:
        """The next token without consuming it."""
        pos = self.pos
        try:
            return self.read_token()
        finally:
            self.pos = pos

    def expect_token(self, token: str) -> None:
        got = self.read_token()
        if got != token:
            raise self.fail(f"expected token {token}, got {got[:40]}")

    # ---- basic types ---------------------------------------------------------------------
    def read_int32(self) -> int:
        if self.binary:
            size = struct.unpack("b", self._take(1, "an integer"))[0]
            if size not in (4, -4):
                raise self.fail(f"expected a 4-byte integer, got size marker {size}")
            fmt = "<i" if size == 4 else "<I"
            return struct.unpack(fmt, self._take(4, "an integer"))[0]
        word = self._word()
        try:
            return int(word)
        except ValueError:
            raise self.fail(f"expected an integer, got {word[:20]!r}") from None

    def read_float(self) -> float:
        if self.binary:
            size = self._take(1, "a float")[0]
            if size == 4:
                return struct.unpack("<f", self._take(4, "a float"))[0]
            if size == 8:
                return struct.unpack("<d", self._take(8, "a float"))[0]
            raise self.fail(f"expected a float, got size marker {size}")
        word = self._word()
        try:
            return float(word)
        except ValueError:
            raise self.fail(f"expected a number, got {word[:20]!r}") from None

    # ---- containers ----------------------------------------------------------------------
    def read_int_vector(self) -> np.ndarray:
        """Kaldi WriteIntegerVector<int32>: element size byte, raw int32 count, raw values."""
        if self.binary:
            size = self._take(1, "an integer vector")[0]
            if size != 4:
                raise self.fail(f"expected an int32 vector, got element size {size}")
            (count,) = struct.unpack("<i", self._take(4, "an integer vector size"))
            if count < 0:
                raise self.fail(f"negative vector size {count}")
            raw = self._take(4 * count, "integer vector data")
            return np.frombuffer(raw, dtype="<i4").astype(np.int32)
        return self._text_vector(int, np.int32, "an integer")

    def read_float_vector(self) -> np.ndarray:
        """Kaldi Vector<float|double>::Write; returned as float32 or float64 as stored."""
        if self.binary:
            token = self.read_token()
            dtype = {"FV": "<f4", "DV": "<f8"}.get(token)
            if dtype is None:
                raise self.fail(f"expected a vector (FV/DV), got {token[:20]}")
            count = self._count()
            raw = self._take(np.dtype(dtype).itemsize * count, "vector data")
            return np.frombuffer(raw, dtype=dtype).astype(dtype[1:])
        return self._text_vector(float, np.float32, "a number")

    def read_float_matrix(self) -> np.ndarray:
        """Kaldi Matrix<float|double>::Write (not compressed matrices)."""
        if self.binary:
            token = self.read_token()
            dtype = {"FM": "<f4", "DM": "<f8"}.get(token)
            if dtype is None:
                raise self.fail(f"expected a matrix (FM/DM), got {token[:20]}")
            rows, cols = self._count(), self._count()
            raw = self._take(np.dtype(dtype).itemsize * rows * cols, "matrix data")
            return np.frombuffer(raw, dtype=dtype).astype(dtype[1:]).reshape(rows, cols)
        if self._open_bracket():
            return np.zeros((0, 0), dtype=np.float32)
        end = self.data.find(b"]", self.pos)
        if end < 0:
            raise self.fail("unterminated matrix (no ])")
        rows = []
        for line in self.data[self.pos : end].split(b"\n"):
            if line.strip():
                try:
                    rows.append([float(w) for w in line.split()])
                except ValueError:
                    raise self.fail("non-numeric matrix data") from None
        self.pos = end + 1
        if any(len(r) != len(rows[0]) for r in rows):
            raise self.fail("matrix rows have different lengths")
        return np.asarray(rows, dtype=np.float32).reshape(len(rows), -1 if rows else 0)

    def _text_vector(self, convert: Callable[[bytes], Any], dtype: type, what: str) -> np.ndarray:
        """A text ``[ a b c ]`` vector, each word read with ``convert`` (``int``/``float``)."""
        values = []
        if not self._open_bracket():
            while (word := self._word()) != b"]":
                try:
                    values.append(convert(word))
                except ValueError:
                    raise self.fail(f"expected {what} or ], got {word[:20]!r}") from None
        return np.asarray(values, dtype=dtype)

    def _count(self) -> int:
        count = self.read_int32()
        if count < 0:
            raise self.fail(f"negative size {count}")
        return count

    def _open_bracket(self) -> bool:
        """Consume the ``[`` opening a text container; True when it is the empty ``[]``."""
        got = self._word()
        if got not in (b"[", b"[]"):
            raise self.fail(f"expected [, got {got[:20]!r}")
        return got == b"[]"


class KaldiWriter:
    """Builds one Kaldi object stream in memory, byte-for-byte as Kaldi's Write methods do."""

    def __init__(self, binary: bool, header: bool = True):
        self.binary = binary
        self.parts: list[bytes] = [BINARY_HEADER] if binary and header else []

    def getvalue(self) -> bytes:
        return b"".join(self.parts)

    def text_newline(self) -> None:
        """Kaldi's ``if (!binary) os << "\\n"``."""
        if not self.binary:
            self.parts.append(b"\n")

    def raw(self, data: bytes) -> None:
        self.parts.append(data)

    def write_token(self, token: str) -> None:
        if not token or any(c.isspace() for c in token):
            raise ValueError(f"invalid Kaldi token {token!r}")
        self.parts.append(token.encode("ascii") + b" ")

    def write_int32(self, value: int) -> None:
        if self.binary:
            self.parts.append(b"\x04" + struct.pack("<i", int(value)))
        else:
            self.parts.append(b"%d " % int(value))

    def write_float(self, value: float) -> None:
        if self.binary:
            self.parts.append(b"\x04" + struct.pack("<f", value))
        else:
            self.parts.append(format_float(value).encode() + b" ")

    def write_int_vector(self, values) -> None:
        arr = np.asarray(values, dtype="<i4")
        if self.binary:
            self.parts.append(b"\x04" + struct.pack("<i", arr.size) + arr.tobytes())
        else:
            self.parts.append(b"[ " + b"".join(b"%d " % v for v in arr.tolist()) + b"]\n")

    def write_float_vector(self, values, double: bool = False) -> None:
        arr = np.asarray(values, dtype="<f8" if double else "<f4").ravel()
        if self.binary:
            self.write_token("DV" if double else "FV")
            self.write_int32(arr.size)
            self.parts.append(arr.tobytes())
        elif arr.size == 0:
            self.parts.append(b" [ ]\n")
        else:
            body = " ".join(format_float(v) for v in arr.tolist())
            self.parts.append(f" [ {body} ]\n".encode())

    def write_float_matrix(self, values, double: bool = False) -> None:
        arr = np.asarray(values, dtype="<f8" if double else "<f4")
        if arr.ndim != 2:
            raise ValueError(f"matrix must be 2-D, got shape {arr.shape}")
        if self.binary:
            self.write_token("DM" if double else "FM")
            self.write_int32(arr.shape[0])
            self.write_int32(arr.shape[1])
            self.parts.append(np.ascontiguousarray(arr).tobytes())
        elif arr.shape[1] == 0:
            self.parts.append(b" [ ]\n")
        else:
            rows = "".join(
                "\n  " + "".join(format_float(v) + " " for v in row) for row in arr.tolist()
            )
            self.parts.append(f" [{rows}]\n".encode())


def format_float(value: float) -> str:
    """A float as C++ ``ostream <<`` prints it at Kaldi's precision 7 (``%.7g``)."""
    return f"{value:.7g}"
