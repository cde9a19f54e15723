"""Kaldi tables and data dirs: wav.scp, text, utt2spk, spk2utt written sorted the way Kaldi
checks them; feats.scp, utt2num_frames and cmvn.scp read the same way by every stage.

Kaldi's tools expect every table sorted by key in the C locale (byte order) and the utterance
ids of a speaker to sort together; ``utils/validate_data_dir.sh`` refuses anything else.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import IO

import kaldiio
import numpy as np

from asrdist.errors import AsrdistError
from asrdist.fsutil import staged_dir

DATA_DIR_FILES = ("wav.scp", "text", "utt2spk", "spk2utt")
COMPRESSED = (b"CM", b"CM2", b"CM3")  # Kaldi's CompressedMatrix formats


def c_sorted(items: Iterable[str]) -> list[str]:
    """Sort as ``LC_ALL=C sort`` does (by UTF-8 bytes)."""
    return sorted(items, key=lambda s: s.encode())


@dataclass(frozen=True)
class Utterance:
    """One utterance of a data dir: its id starts with its speaker id (Kaldi's convention)."""

    utt_id: str
    speaker: str
    text: str
    wav_path: str


def write_data_dir(directory: str | os.PathLike, utterances: Iterable[Utterance]) -> None:
    """Write wav.scp, text, utt2spk and spk2utt for ``utterances`` (atomically, as a dir)."""
    utts = {u.utt_id: u for u in utterances}
    if not utts:
        raise AsrdistError(f"no utterances to write into {directory}")
    ids = c_sorted(utts)
    for utt_id in ids:
        if not utt_id.startswith(utts[utt_id].speaker):
            raise AsrdistError(
                f"utterance {utt_id} does not start with its speaker id {utts[utt_id].speaker}"
            )
    spk2utt: dict[str, list[str]] = {}
    for utt_id in ids:
        spk2utt.setdefault(utts[utt_id].speaker, []).append(utt_id)
    tables = {
        "wav.scp": [f"{i} {utts[i].wav_path}" for i in ids],
        "text": [f"{i} {utts[i].text}" for i in ids],
        "utt2spk": [f"{i} {utts[i].speaker}" for i in ids],
        "spk2utt": [f"{s} {' '.join(spk2utt[s])}" for s in c_sorted(spk2utt)],
    }
    with staged_dir(directory) as tmp:
        for name, lines in tables.items():
            (tmp / name).write_text("".join(line + "\n" for line in lines))


def read_utf8(path: Path) -> str:
    """A text file's content; not UTF-8 is one error naming the file, line and byte."""
    data = path.read_bytes()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        raise AsrdistError(f"{path}:{line}: not UTF-8 text (byte 0x{data[e.start]:02x} at "
                           f"offset {e.start}); convert it, e.g. iconv -f latin1 -t utf-8") from e


def read_table(path: str | os.PathLike, require_value: bool = False) -> dict[str, str]:
    """Read a Kaldi ``key value...`` table (text, utt2spk, wav.scp, feats.scp ...) in file order.

    The value is the rest of the line after the first run of whitespace; it may be empty (an
    empty transcript) unless ``require_value``. One reader for every table, so they all report
    a missing file, a duplicate key or a bare key the same way.
    """
    path = Path(path)
    if not path.is_file():
        raise AsrdistError(f"missing file {path}")
    table: dict[str, str] = {}
    for lineno, line in enumerate(read_utf8(path).splitlines(), 1):
        parts = line.split(maxsplit=1)
        if not parts:
            continue
        if len(parts) == 1 and require_value:
            raise AsrdistError(f"{path}:{lineno}: expected '<key> <value>', got {line[:60]!r}")
        if parts[0] in table:
            raise AsrdistError(f"{path}:{lineno}: duplicate key {parts[0]}")
        table[parts[0]] = parts[1].strip() if len(parts) == 2 else ""
    return table


def validate_data_dir(directory: str | os.PathLike) -> list[str]:
    """Check the four tables agree and are sorted; returns the sorted utterance ids."""
    directory = Path(directory)
    for name in DATA_DIR_FILES:
        path = directory / name
        keys = [line.split(" ", 1)[0] for line in read_utf8(path).splitlines()] \
            if path.is_file() else None
        if keys is None:
            raise AsrdistError(f"missing file {path}")
        if keys != c_sorted(set(keys)):
            raise AsrdistError(f"{path} is not sorted (LC_ALL=C) or has duplicate keys")
    wav = read_table(directory / "wav.scp")
    utt2spk = read_table(directory / "utt2spk")
    if not wav:
        raise AsrdistError(f"{directory / 'wav.scp'} is empty")
    for name in ("text", "utt2spk"):
        if set(read_table(directory / name)) != set(wav):
            raise AsrdistError(f"{directory / name} and wav.scp list different utterances")
    spk2utt = read_table(directory / "spk2utt")
    inverted = {u: s for s, us in spk2utt.items() for u in us.split()}
    if inverted != utt2spk:
        raise AsrdistError(f"{directory / 'spk2utt'} does not invert utt2spk")
    return c_sorted(wav)


def read_symbols(path: str | os.PathLike) -> dict[str, int]:
    """A Kaldi symbol table (words.txt, phones.txt): symbol -> id."""
    path = Path(path)
    if not path.is_file():
        raise AsrdistError(f"{path}: no such symbol table")
    table = {}
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        fields = line.split()
        if len(fields) != 2 or not fields[1].isdigit():
            raise AsrdistError(f"{path}:{n}: expected '<symbol> <integer>'")
        table[fields[0]] = int(fields[1])
    return table


def read_num_frames(path: str | os.PathLike) -> dict[str, int]:
    """utt2num_frames: utterance -> frame count."""
    counts = {}
    for utt, value in read_table(path, require_value=True).items():
        if not value.isdigit():
            raise AsrdistError(f"{path}: utterance {utt}: frame count {value!r} is not a number")
        counts[utt] = int(value)
    return counts


def matrix_rows(utt: str, rxfilename: str, files: dict[str, IO[bytes]] | None = None) -> int:
    """Rows of a feature matrix, from its ark header (plain or compressed, as make_fbank.sh
    writes them by default); a whole load only for unusual entries. ``files`` keeps the arks
    open from one call to the next (millions of utterances; the caller closes them)."""
    rows = _header_rows(_matrix_head(rxfilename, files))
    if rows is not None:
        return rows
    try:
        return int(kaldiio.load_mat(rxfilename).shape[0])
    except Exception as err:  # kaldiio raises many types for a bad entry
        raise AsrdistError(
            f"features of utterance {utt}: cannot read {rxfilename} ({err})"
        ) from None


def _matrix_head(rxfilename: str, files: dict[str, IO[bytes]] | None) -> bytes:
    """The first bytes of the ark entry at ``path:offset``; none for pipes and the like."""
    path, _, offset = rxfilename.rpartition(":")
    if not offset.isdigit():
        path, offset = rxfilename, "0"
    f = files.get(path) if files is not None else None
    if f is None:
        if rxfilename.endswith("|") or not os.path.isfile(path):
            return b""
        f = open(path, "rb")
        if files is None:
            with f:
                f.seek(int(offset))
                return f.read(24)
        files[path] = f
    f.seek(int(offset))
    return f.read(24)


def _header_rows(head: bytes) -> int | None:
    """Rows from a binary matrix header: ``\\0B`` then FM/DM and a 4-byte int32, or a
    compressed matrix's GlobalHeader (float min, float range, int32 rows, int32 cols)."""
    if not head.startswith(b"\0B"):
        return None
    space = head.find(b" ", 2)
    token = head[2:space] if space > 0 else b""
    if token in (b"FM", b"DM") and head[space + 1 : space + 2] == b"\4" and len(head) >= space + 6:
        return int.from_bytes(head[space + 2 : space + 6], "little", signed=True)
    if token in COMPRESSED and len(head) >= space + 13:
        return int.from_bytes(head[space + 9 : space + 13], "little", signed=True)
    return None


def frame_counts(feats: dict[str, str], utt2num_frames: Path) -> dict[str, int]:
    """Frames of every utterance of ``feats``: from utt2num_frames where it lists the utterance,
    else from the matrix header."""
    listed = read_num_frames(utt2num_frames) if utt2num_frames.is_file() else {}
    return {u: listed[u] if u in listed else matrix_rows(u, rx) for u, rx in feats.items()}


@dataclass
class DataDir:
    """A Kaldi data dir with features, as alignment, training and decoding read it.

    One reader for every stage, so a missing table, an utterance without a transcript or a
    speaker without CMVN stats is reported the same way everywhere.
    """

    path: Path
    feats: dict[str, str]  # utterance -> rxspecifier, in feats.scp order
    utt2spk: dict[str, str]  # empty when the dir has no utt2spk (each utterance its own speaker)
    text: dict[str, list[str]]  # empty unless loaded with need=("text", ...)

    @classmethod
    def load(cls, path: str | os.PathLike, need: Iterable[str] = ()) -> DataDir:
        """Read feats.scp, and utt2spk and text when present; ``need`` names the files (among
        text, utt2spk, cmvn.scp) that must exist and cover every utterance."""
        path, need = Path(path), set(need)
        if not path.is_dir():
            raise AsrdistError(f"{path}: no such data dir")
        for name in ["feats.scp", *sorted(need)]:
            if not (path / name).is_file():
                raise AsrdistError(f"{path / name}: missing (run asrdist-features first)")
        feats = read_table(path / "feats.scp", require_value=True)
        has = {name: (path / name).is_file() for name in ("text", "utt2spk")}
        utt2spk = read_table(path / "utt2spk", require_value=True) if has["utt2spk"] else {}
        text = {u: t.split() for u, t in read_table(path / "text").items()} if has["text"] else {}
        for name, table, what in (("text", text, "transcript"), ("utt2spk", utt2spk, "speaker")):
            missing = next((u for u in feats if u not in table), None) if name in need else None
            if missing is not None:
                raise AsrdistError(f"{path / name}: no {what} for utterance {missing}")
        return cls(path, feats, utt2spk, text)

    @cached_property
    def utts(self) -> list[str]:
        """Utterances with features, C-sorted (the order Kaldi's tables use)."""
        return c_sorted(self.feats)

    def speaker(self, utt: str) -> str:
        return self.utt2spk.get(utt, utt)

    def num_frames(self) -> dict[str, int]:
        """Frames per utterance: utt2num_frames, else the matrix headers."""
        return frame_counts(self.feats, self.path / "utt2num_frames")

    @cached_property
    def _cmvn(self) -> dict[str, np.ndarray]:
        scp = self.path / "cmvn.scp"
        if not scp.is_file():
            return {}
        return {spk: np.asarray(m) for spk, m in kaldiio.load_scp(str(scp)).items()}

    def cmvn_stats(self) -> dict[str, np.ndarray]:
        """Speaker -> Kaldi CMVN stats from cmvn.scp (empty when there is none); read once,
        however many batches of utterances ask for them."""
        return self._cmvn
