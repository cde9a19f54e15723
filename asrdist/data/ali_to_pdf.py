"""Kaldi's ``ali-to-pdf`` run beside ingestion, compared entry by entry as both go.

When Kaldi's binary is on PATH, ingestion checks its own transition-id -> pdf-id map against
Kaldi's on every alignment. The archive is fed to ``ali-to-pdf`` by a thread while ingestion
reads the same archive itself; each of Kaldi's text lines is read when ingestion has the same
entry, so neither side's output is held whole (an archive of 2000 h is gigabytes).
"""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from asrdist.errors import AsrdistError
from asrdist.kaldi.alignments import open_gzip


class AliToPdf:
    """One archive through ``ali-to-pdf MODEL ark:- ark,t:-``."""

    def __init__(self, exe: str, model: Path, ali_file: Path) -> None:
        self.ali_file = ali_file
        self.stderr = tempfile.TemporaryFile()
        self.proc = subprocess.Popen([exe, str(model), "ark:-", "ark,t:-"],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self.stderr)
        self.feeder = threading.Thread(target=self._feed, daemon=True)
        self.feeder.start()

    def _feed(self) -> None:
        """Decompress the archive into ali-to-pdf's stdin (a corrupt one is reported by
        ingestion's own reading of it)."""
        assert self.proc.stdin is not None
        with contextlib.suppress(OSError, AsrdistError), self.proc.stdin as sink:
            with open_gzip(self.ali_file) as read:
                while block := read(1 << 20):
                    sink.write(block)

    def compare(self, utt: str, pdfs: np.ndarray) -> None:
        """Kaldi's next entry must be ``utt`` with exactly ``pdfs``."""
        assert self.proc.stdout is not None
        words = self.proc.stdout.readline().split()
        if not words:
            self._ended()
        if not words or words[0].decode(errors="replace") != utt:
            raise AsrdistError(f"{self.ali_file}: utterance {utt}: ali-to-pdf gave "
                               f"{'nothing' if not words else words[0].decode(errors='replace')}"
                               " in its place")
        try:
            theirs = np.asarray([int(w) for w in words[1:]], dtype=np.int64)
        except ValueError:
            raise AsrdistError(f"{self.ali_file}: utterance {utt}: ali-to-pdf's output is not "
                               "integers") from None
        if not np.array_equal(theirs, pdfs):
            raise AsrdistError(
                f"{self.ali_file}: utterance {utt}: pdf-ids differ from ali-to-pdf's "
                "(transition model parsing disagrees with Kaldi)"
            )

    def finish(self) -> None:
        """After the last entry: Kaldi has nothing more and succeeded."""
        assert self.proc.stdout is not None
        extra = self.proc.stdout.readline().split()
        if extra:
            raise AsrdistError(f"{self.ali_file}: ali-to-pdf gave utterance "
                               f"{extra[0].decode(errors='replace')} that the archive lacks")
        self._ended()

    def _ended(self) -> None:
        """At the end of ali-to-pdf's output: raise its own error if it failed."""
        self.feeder.join()
        if self.proc.wait() != 0:
            self.stderr.seek(0)
            err = self.stderr.read().decode(errors="replace").strip().splitlines()[-1:]
            raise AsrdistError(f"{self.ali_file}: ali-to-pdf failed: {' '.join(err)}")

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        self.feeder.join()
        for stream in (self.proc.stdout, self.stderr):
            if stream is not None:
                stream.close()


@contextlib.contextmanager
def ali_to_pdf_beside(model: Path, ali_file: Path) -> Iterator[AliToPdf | None]:
    """An :class:`AliToPdf` for ``ali_file`` when Kaldi's ``ali-to-pdf`` is on PATH, else None."""
    exe = shutil.which("ali-to-pdf")
    if exe is None:
        yield None
        return
    check = AliToPdf(exe, model, ali_file)
    try:
        yield check
    finally:
        check.close()
