"""Kaldi data dirs: wav.scp, text, utt2spk, spk2utt, written sorted the way Kaldi checks them.

Kaldi's tools expect every table sorted by key in the C locale (byte order) and the utterance
ids of a speaker to sort together; ``utils/validate_data_dir.sh`` refuses anything else.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from asrdist.errors import AsrdistError
from asrdist.fsutil import staged_dir

DATA_DIR_FILES = ("wav.scp", "text", "utt2spk", "spk2utt")


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
    for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
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
        keys = [line.split(" ", 1)[0] for line in path.read_text().splitlines()] \
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


@dataclass
class DataDir:
    """The parts of a Kaldi data dir that GMM training reads."""

    path: Path
    utts: list[str]  # sorted, those with features
    text: dict[str, list[str]]
    utt2spk: dict[str, str]

    @classmethod
    def load(cls, path: Path) -> DataDir:
        path = Path(path)
        for name in ("feats.scp", "cmvn.scp", "text", "utt2spk"):
            if not (path / name).is_file():
                raise AsrdistError(f"{path / name}: missing (run asrdist-features first)")
        text = {u: t.split() for u, t in read_table(path / "text").items()}
        utt2spk = read_table(path / "utt2spk", require_value=True)
        utts = sorted(read_table(path / "feats.scp", require_value=True), key=str.encode)
        for u in utts:
            if u not in text:
                raise AsrdistError(f"{path / 'text'}: no transcript for utterance {u}")
            if u not in utt2spk:
                raise AsrdistError(f"{path / 'utt2spk'}: no speaker for utterance {u}")
        return cls(path, utts, text, utt2spk)
