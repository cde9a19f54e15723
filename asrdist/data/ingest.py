"""Stage 3: turn a Kaldi alignment dir into per-frame pdf-id targets for the features.

Reads ``num_jobs``, ``ali.{1..N}.gz`` and ``final.mdl`` (no Kaldi binaries), maps every
transition-id to its pdf-id like ``ali-to-pdf``, matches each alignment to its feature length
(Kaldi tolerates a frame or two of difference: pad with the last pdf or truncate; anything
larger is an error naming the utterance), and writes ``pdf.ark``/``pdf.scp`` (int32 vectors
readable with kaldiio.load_scp), ``num_pdfs``, ``pdf_counts`` (for priors) and a report.
One streamed pass: pdf.ark is filled in the alignments' order, pdf.scp lists the utterances
in feats.scp's order. Outputs are written atomically after every check passed, pdf.scp last,
then a done marker; a rerun with the same options and inputs skips (asrdist.stage).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import sqlite3
import tempfile
from collections import Counter
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import IO

import numpy as np

from asrdist.data.ali_to_pdf import ali_to_pdf_beside
from asrdist.data.utt_index import UtteranceIndex
from asrdist.errors import AsrdistError
from asrdist.fsutil import atomic_write, naming_full_disk
from asrdist.kaldi.alignments import alignment_files, read_alignments, write_int32_ark
from asrdist.kaldi.data_dir import matrix_rows
from asrdist.kaldi.transition_model import TransitionInfo, read_transition_model
from asrdist.progress import track
from asrdist.stage import Skipped, check_done

log = logging.getLogger(__name__)

STAGE = "ingest_ali"
OUTPUTS = ("pdf.ark", "pdf.scp", "num_pdfs", "pdf_counts", "report.txt", "report.json")
COUNT_BATCH = 1 << 18  # pdfs per bincount (1 MiB of int32)
TOLERANCE = 2  # frames of alignment-feature length difference fixed (Kaldi's usual 1-2)


@dataclass
class IngestReport:
    """What ingestion found; ``to_text()`` is what report.txt holds and the CLI prints."""

    ali_dir: str
    feats_scp: str
    num_utterances: int
    num_aligned: int
    num_missing: int
    num_without_features: int
    total_frames: int
    num_pdfs: int
    mismatch_histogram: dict[int, int]
    pdf_count_min: int
    pdf_count_median: float
    pdf_count_max: int
    zero_count_pdfs: list[int]
    cross_checked_with_ali_to_pdf: bool

    @property
    def missing_fraction(self) -> float:
        return self.num_missing / self.num_utterances if self.num_utterances else 0.0

    def to_text(self) -> str:
        hist = ", ".join(f"{d:+d}: {n}" for d, n in sorted(self.mismatch_histogram.items()))
        zero = self.zero_count_pdfs
        zero_list = " ".join(map(str, zero[:20])) + (" ..." if len(zero) > 20 else "")
        lines = [
            f"alignment dir: {self.ali_dir}",
            f"features: {self.feats_scp}",
            f"utterances aligned: {self.num_aligned} of {self.num_utterances} "
            f"({100.0 * (1.0 - self.missing_fraction):.2f}%)",
            f"utterances missing an alignment: {self.num_missing} "
            f"({100.0 * self.missing_fraction:.2f}%)",
            f"alignments without features (ignored): {self.num_without_features}",
            f"frames: {self.total_frames}",
            "length mismatch (alignment - features) {diff: count}: {" + hist + "}",
            f"pdfs: {self.num_pdfs}",
            f"pdf frame counts: min {self.pdf_count_min}, median {self.pdf_count_median:g}, "
            f"max {self.pdf_count_max}",
            f"pdfs with zero count: {len(zero)}" + (f" ({zero_list})" if zero else ""),
            "cross-checked with ali-to-pdf: "
            + ("yes" if self.cross_checked_with_ali_to_pdf else "no (not on PATH)"),
        ]
        return "\n".join(lines) + "\n"

    @classmethod
    def load(cls, out_dir: Path) -> IngestReport:
        try:
            data = json.loads((out_dir / "report.json").read_text())
        except (FileNotFoundError, ValueError):
            raise AsrdistError(
                f"{out_dir}: marked done but report.json is missing or unreadable; "
                f"remove {out_dir}/.{STAGE}.done to redo"
            ) from None
        data["mismatch_histogram"] = {int(k): v for k, v in data["mismatch_histogram"].items()}
        return cls(**data)


# ---- mapping --------------------------------------------------------------------------------


def map_to_pdfs(tids: np.ndarray, info: TransitionInfo, utt: str, source: Path) -> np.ndarray:
    """Transition-ids -> pdf-ids; an out-of-range id names the utterance and file."""
    if tids.size and (tids.min() < 1 or tids.max() > info.num_transition_ids):
        bad = int(tids[(tids < 1) | (tids > info.num_transition_ids)][0])
        raise AsrdistError(
            f"{source}: utterance {utt}: transition-id {bad} out of range "
            f"1..{info.num_transition_ids} of final.mdl (alignments from another model?)"
        )
    return info.tid_to_pdf[tids]


def fit_length(pdfs: np.ndarray, num_frames: int, tolerance: int, utt: str) -> np.ndarray:
    """Pad with the last pdf or truncate by at most ``tolerance`` frames; refuse more."""
    diff = pdfs.size - num_frames
    if abs(diff) > tolerance or pdfs.size == 0:
        raise AsrdistError(
            f"utterance {utt}: alignment has {pdfs.size} frames but features have {num_frames} "
            f"(difference {diff:+d} exceeds --tolerance {tolerance}; wrong frame shift or "
            "snip-edges?)"
        )
    if diff > 0:
        return pdfs[:num_frames]
    if diff < 0:
        return np.concatenate([pdfs, np.full(-diff, pdfs[-1], dtype=pdfs.dtype)])
    return pdfs


# ---- the stage ------------------------------------------------------------------------------


@dataclass
class _Tally:
    """What the pass over the alignments counted (its size does not grow with the corpus)."""

    counts: np.ndarray  # frames per pdf, after the length fixes
    mismatch: Counter[int] = field(default_factory=Counter)
    num_aligned: int = 0
    num_without_features: int = 0
    _pending: list[np.ndarray] = field(default_factory=list)  # pdfs not counted yet
    _pending_frames: int = 0

    def add(self, pdfs: np.ndarray) -> None:
        """Count ``pdfs`` (a batch of utterances at a time: one bincount per utterance would
        allocate a num_pdfs array for each of millions)."""
        self.num_aligned += 1
        self._pending.append(pdfs)
        self._pending_frames += pdfs.size
        if self._pending_frames >= COUNT_BATCH:
            self.flush()

    def flush(self) -> None:
        if self._pending:
            self.counts += np.bincount(np.concatenate(self._pending), minlength=self.counts.size)
            self._pending, self._pending_frames = [], 0


def ingest_alignments(
    ali_dir: str | os.PathLike,
    feats_scp: str | os.PathLike,
    out_dir: str | os.PathLike,
    tolerance: int = TOLERANCE,
    max_missing_fraction: float = 0.05,
) -> IngestReport | Skipped:
    """Write pdf targets for every aligned utterance of ``feats_scp`` into ``out_dir``.

    Skipped when ``out_dir`` is done with the same options and inputs
    (asrdist.stage): feats_scp and the alignment dir's num_jobs, ali.*.gz and final.mdl, not
    the rest of it (a decode dir inside it must not redo ingestion).

    Streamed: each alignment is read, mapped, fitted to its features' length and appended to
    pdf.ark as it comes; what is kept per utterance (its frame count, where its targets went)
    is in an SQLite file in ``out_dir`` (asrdist.data.utt_index), so memory stays flat however
    large the corpus.
    """
    ali_dir, feats_scp, out_dir = Path(ali_dir), Path(feats_scp), Path(out_dir)
    inputs = [feats_scp, ali_dir / "num_jobs", ali_dir / "final.mdl",
              *sorted(ali_dir.glob("ali.*.gz"))]
    check = check_done(out_dir, STAGE, {"tolerance": tolerance,
                                        "max_missing_fraction": max_missing_fraction}, inputs)
    if check.done:
        return check.skipped()
    if tolerance < 0:
        raise AsrdistError(f"--tolerance must be >= 0, got {tolerance}")
    if not 0.0 <= max_missing_fraction <= 1.0:
        raise AsrdistError(f"--max-missing must be in [0, 1], got {max_missing_fraction}")
    _remove_leftovers(out_dir)

    files = alignment_files(ali_dir)
    model = ali_dir / "final.mdl"
    info = read_transition_model(model)
    out_dir.mkdir(parents=True, exist_ok=True)
    fd, index_path = tempfile.mkstemp(dir=out_dir, prefix=f".{STAGE}.index.", suffix=".sqlite")
    os.close(fd)
    index = UtteranceIndex(index_path)
    try:
        with _naming(index_path):  # the scratch index, for SQLite's "disk is full"
            report = _ingest(ali_dir, feats_scp, out_dir, files, info, index, tolerance,
                             max_missing_fraction)
    finally:
        index.close()
        os.unlink(index_path)
    check.mark_done()
    return report


def _remove_leftovers(out_dir: Path) -> None:
    """Outputs of an earlier run, and the scratch files of a killed one, must not stay: a
    killed run leaves an index and temporary files that atomic writes never renamed."""
    for name in OUTPUTS:
        (out_dir / name).unlink(missing_ok=True)
    if out_dir.is_dir():
        for pattern in (f".{STAGE}.index.*.sqlite", *(f".{name}.*.tmp" for name in OUTPUTS)):
            for leftover in out_dir.glob(pattern):
                leftover.unlink(missing_ok=True)


def _ingest(
    ali_dir: Path, feats_scp: Path, out_dir: Path, files: list[Path], info: TransitionInfo,
    index: UtteranceIndex, tolerance: int, max_missing_fraction: float,
) -> IngestReport:
    arks: dict[str, IO[bytes]] = {}
    try:
        num_utts = index.load_features(feats_scp, lambda utt, rx: matrix_rows(utt, rx, arks))
    finally:
        for ark in arks.values():
            ark.close()
    if not num_utts:
        raise AsrdistError(f"{feats_scp}: empty")
    model = ali_dir / "final.mdl"
    ark = out_dir.resolve() / "pdf.ark"  # absolute for the scp, and never a link's target
    with _naming(ark), atomic_write(ark, "wb") as f:  # removed unless all pass
        tally = _Tally(np.zeros(info.num_pdfs, dtype=np.int64))
        for ali_file in track(files, "reading alignments", "job"):
            _ingest_archive(f, ali_file, model, info, index, tolerance, tally)
        tally.flush()
        missing = index.num_missing()
        if missing / num_utts > max_missing_fraction:
            raise AsrdistError(
                f"{ali_dir}: {missing} of {num_utts} utterances in {feats_scp} have no "
                f"alignment ({100.0 * missing / num_utts:.1f}% > --max-missing "
                f"{max_missing_fraction:g})"
            )
        if not tally.num_aligned:
            raise AsrdistError(f"{ali_dir}: no alignment matches an utterance of {feats_scp}")

    counts = tally.counts
    report = IngestReport(
        ali_dir=str(ali_dir),
        feats_scp=str(feats_scp),
        num_utterances=num_utts,
        num_aligned=tally.num_aligned,
        num_missing=missing,
        num_without_features=tally.num_without_features,
        total_frames=int(counts.sum()),
        num_pdfs=info.num_pdfs,
        mismatch_histogram=dict(sorted(tally.mismatch.items())),
        pdf_count_min=int(counts.min()),
        pdf_count_median=float(np.median(counts)),
        pdf_count_max=int(counts.max()),
        zero_count_pdfs=np.flatnonzero(counts == 0).tolist(),
        cross_checked_with_ali_to_pdf=shutil.which("ali-to-pdf") is not None,
    )
    _write_outputs(out_dir, ark, index, counts, report)
    return report


def _ingest_archive(
    f: IO[bytes], ali_file: Path, model: Path, info: TransitionInfo, index: UtteranceIndex,
    tolerance: int, tally: _Tally,
) -> None:
    """Map, check and append to ``f`` the targets of every alignment in ``ali_file``."""
    with ali_to_pdf_beside(model, ali_file) as kaldi:
        for utt, tids in read_alignments(ali_file):
            pdfs = map_to_pdfs(tids, info, utt, ali_file)
            if kaldi is not None:
                kaldi.compare(utt, pdfs)  # before the length fix, as ali-to-pdf writes them
            frames = index.claim(utt, ali_file)
            if frames is None:
                tally.num_without_features += 1
                continue
            tally.mismatch[int(pdfs.size - frames)] += 1
            fitted = fit_length(pdfs, frames, tolerance, utt)
            tally.add(fitted)
            [(_, offset)] = write_int32_ark(f, [(utt, fitted)])
            index.place(utt, offset)
        if kaldi is not None:
            kaldi.finish()


def _write_outputs(
    out_dir: Path, ark: Path, index: UtteranceIndex, counts: np.ndarray, report: IngestReport
) -> None:
    """Everything after pdf.ark; pdf.scp (what the trainer reads) last, then the done marker."""
    small = {"num_pdfs": f"{report.num_pdfs}\n",
             "pdf_counts": "[ " + " ".join(str(int(c)) for c in counts) + " ]\n",
             "report.txt": report.to_text(), "report.json": json.dumps(asdict(report), indent=1)}
    for name, text in small.items():
        with _naming(out_dir / name), atomic_write(out_dir / name) as f:
            f.write(text)
    with _naming(out_dir / "pdf.scp"), atomic_write(out_dir / "pdf.scp") as f:
        f.writelines(f"{utt} {ark}:{offset}\n" for utt, offset in index.placed())


@contextlib.contextmanager
def _naming(path: str | os.PathLike) -> Iterator[None]:
    """A full disk or quota met while writing ``path`` is one line naming it (SQLite's own
    error says only "database or disk is full")."""
    try:
        with naming_full_disk(path):
            yield
    except sqlite3.OperationalError as e:
        if e.sqlite_errorcode != sqlite3.SQLITE_FULL:
            raise
        raise AsrdistError(f"{path}: cannot write: {e}") from e


def read_pdf_counts(out_dir: str | os.PathLike, num_pdfs: int | None = None) -> np.ndarray:
    """The per-pdf frame counts written by ingestion (for priors), checked against the
    model's number of outputs when ``num_pdfs`` is given."""
    path = Path(out_dir) / "pdf_counts"
    if not path.is_file():
        raise AsrdistError(f"{path}: missing (run asrdist-ingest-ali)")
    words = path.read_text().split()
    if len(words) < 2 or words[0] != "[" or words[-1] != "]":
        raise AsrdistError(f"{path}: expected a Kaldi text vector '[ c0 c1 ... ]'")
    try:
        counts = np.asarray([int(float(w)) for w in words[1:-1]], dtype=np.int64)
    except ValueError:
        raise AsrdistError(f"{path}: non-numeric count") from None
    if num_pdfs is not None and len(counts) != num_pdfs:
        raise AsrdistError(f"{path}: {len(counts)} pdf counts for {num_pdfs} pdfs")
    if (counts < 0).any() or counts.sum() <= 0:
        raise AsrdistError(f"{path}: pdf counts must be non-negative and not all zero")
    return counts
