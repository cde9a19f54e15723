"""The feature utterances of a corpus as an SQLite table on disk, for alignment ingestion.

Ingestion matches every alignment to its utterance of feats.scp (frame count, where its
targets went). Switchboard-2000 with speed perturbation has ~7.5 million utterances: Python
dicts of their ids, read locations and counts take gigabytes and grow with the corpus, while
this table lives in a scratch file and the process keeps only SQLite's page cache (bounded).
Rows keep feats.scp's order, so pdf.scp is written in it by a plain scan.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from asrdist.errors import AsrdistError

BATCH = 20_000  # rows per executemany
CACHE_KIB = 8 * 1024  # SQLite's page cache: the index's whole share of memory


def _table_lines(path: Path) -> Iterator[tuple[int, str, str]]:
    """(line number, key, value) of a Kaldi ``key value`` table, read a line at a time; a
    bare key or text that is not UTF-8 is one error naming the file and line."""
    try:
        f = open(path, "rb")
    except FileNotFoundError:
        raise AsrdistError(f"missing file {path}") from None
    with f:
        for lineno, raw in enumerate(f, 1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as e:
                raise AsrdistError(f"{path}:{lineno}: not UTF-8 text (byte 0x{raw[e.start]:02x})"
                                   "; convert it, e.g. iconv -f latin1 -t utf-8") from e
            parts = line.split(maxsplit=1)
            if not parts:
                continue
            if len(parts) == 1:
                raise AsrdistError(f"{path}:{lineno}: expected '<key> <value>', got {line[:60]!r}")
            yield lineno, parts[0], parts[1].strip()


def _frame_lines(path: Path) -> Iterator[tuple[int, str, int]]:
    """(line number, utterance, frame count) of utt2num_frames."""
    for lineno, utt, value in _table_lines(path):
        if not value.isdigit():
            raise AsrdistError(f"{path}: utterance {utt}: frame count {value!r} is not a number")
        yield lineno, utt, int(value)


def _batches(items: Iterable, size: int = BATCH) -> Iterator[list]:
    batch = []
    for item in items:
        batch.append(item)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


class UtteranceIndex:
    """feats.scp's utterances (order, read location, frame count) and, once matched, the
    offset of each one's targets in pdf.ark; also the ids of alignments without features."""

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = Path(path)
        self.db = sqlite3.connect(self.path)
        for pragma in ("journal_mode = OFF", "synchronous = OFF", "temp_store = FILE",
                       f"cache_size = -{CACHE_KIB}"):
            self.db.execute(f"PRAGMA {pragma}")
        self.db.executescript(
            "CREATE TABLE feats (row INTEGER PRIMARY KEY, utt TEXT NOT NULL UNIQUE,"
            " rx TEXT NOT NULL, frames INTEGER, offset INTEGER);"
            "CREATE TABLE listed (utt TEXT PRIMARY KEY, line INTEGER NOT NULL,"
            " frames INTEGER NOT NULL)"
            " WITHOUT ROWID;"
            "CREATE TABLE stray (utt TEXT PRIMARY KEY) WITHOUT ROWID;"
        )
        self._placed: dict[str, tuple[int, int]] = {}  # (offset, row) not stored yet
        self._row = -1  # the row of the utterance claimed last

    def close(self) -> None:
        self.db.close()

    # ---- features -------------------------------------------------------------------------

    def load_features(self, feats_scp: Path, matrix_rows: Callable[[str, str], int]) -> int:
        """Read feats.scp and every utterance's frame count (utt2num_frames beside it where it
        lists the utterance, else ``matrix_rows(utt, rx)``); returns the number of utterances."""
        self._insert_unique("feats", "row, utt, rx", feats_scp, _table_lines(feats_scp))
        listed = feats_scp.parent / "utt2num_frames"
        if listed.is_file():
            self._insert_unique("listed", "line, utt, frames", listed, _frame_lines(listed))
            self.db.execute("UPDATE feats SET frames = (SELECT frames FROM listed"
                            " WHERE listed.utt = feats.utt)")
        last = -1
        while rows := self.db.execute(
            "SELECT row, utt, rx FROM feats WHERE row > ? AND frames IS NULL ORDER BY row LIMIT ?",
            (last, BATCH),
        ).fetchall():
            self.db.executemany("UPDATE feats SET frames = ? WHERE row = ?",
                                [(matrix_rows(utt, rx), row) for row, utt, rx in rows])
            last = rows[-1][0]
        return self.db.execute("SELECT count(*) FROM feats").fetchone()[0]

    def _insert_unique(self, table: str, columns: str, path: Path, rows: Iterable[tuple]) -> None:
        """Insert (line number, key, value) rows; a key inserted before is the file's
        ``duplicate key`` error, naming the later line."""
        line_column = columns.split(",")[0]
        insert = f"INSERT OR IGNORE INTO {table} ({columns}) VALUES (?, ?, ?)"
        for batch in _batches(rows):
            before = self.db.total_changes
            self.db.executemany(insert, batch)
            if self.db.total_changes - before == len(batch):
                continue
            for lineno, key, _ in batch:
                first = self.db.execute(f"SELECT {line_column} FROM {table} WHERE utt = ?",
                                        (key,)).fetchone()[0]
                if first != lineno:
                    raise AsrdistError(f"{path}:{lineno}: duplicate key {key}")

    # ---- matching alignments --------------------------------------------------------------

    def claim(self, utt: str, source: Path) -> int | None:
        """The frame count of ``utt``'s features, None when it has none (an alignment to
        ignore); an utterance claimed twice is an error naming ``source``."""
        found = self.db.execute("SELECT frames, offset, row FROM feats WHERE utt = ?",
                                (utt,)).fetchone()
        if found is None:
            try:
                self.db.execute("INSERT INTO stray (utt) VALUES (?)", (utt,))
            except sqlite3.IntegrityError:
                raise AsrdistError(f"{source}: utterance {utt} aligned more than once") from None
            return None
        if found[1] is not None or utt in self._placed:
            raise AsrdistError(f"{source}: utterance {utt} aligned more than once")
        self._row = found[2]
        return found[0]

    def place(self, utt: str, offset: int) -> None:
        """Record where the targets of ``utt``, the utterance claimed last, start in pdf.ark
        (stored a batch at a time)."""
        self._placed[utt] = (offset, self._row)
        if len(self._placed) >= BATCH:
            self._flush()

    def _flush(self) -> None:
        self.db.executemany("UPDATE feats SET offset = ? WHERE row = ?", self._placed.values())
        self._placed.clear()

    def num_missing(self) -> int:
        """Utterances of feats.scp without targets."""
        self._flush()
        return self.db.execute("SELECT count(*) FROM feats WHERE offset IS NULL").fetchone()[0]

    def placed(self) -> Iterator[tuple[str, int]]:
        """(utterance, offset in pdf.ark) of every matched utterance, in feats.scp's order."""
        self._flush()
        yield from self.db.execute(
            "SELECT utt, offset FROM feats WHERE offset IS NOT NULL ORDER BY row")
