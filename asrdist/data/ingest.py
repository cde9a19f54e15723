"""Stage 3: turn a Kaldi alignment dir into per-frame pdf-id targets for the features.

Reads ``num_jobs``, ``ali.{1..N}.gz`` and ``final.mdl`` (no Kaldi binaries), maps every
transition-id to its pdf-id like ``ali-to-pdf``, matches each alignment to its feature length
(Kaldi tolerates a frame or two of difference: pad with the last pdf or truncate; anything
larger is an error naming the utterance), and writes ``pdf.ark``/``pdf.scp`` (int32 vectors
readable with kaldiio.load_scp), ``num_pdfs``, ``pdf_counts`` (for priors) and a report.
Outputs are written atomically after every check passed, then a done marker; a rerun with the
same options and inputs skips (asrdist.stage).
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from asrdist.errors import AsrdistError
from asrdist.fsutil import atomic_write
from asrdist.kaldi.alignments import (
    alignment_files,
    parse_int32_ark,
    read_alignments,
    read_gzip,
    write_int32_ark,
)
from asrdist.kaldi.data_dir import frame_counts, read_table
from asrdist.kaldi.transition_model import TransitionInfo, read_transition_model
from asrdist.progress import track
from asrdist.stage import Skipped, check_done

log = logging.getLogger(__name__)

STAGE = "ingest_ali"
OUTPUTS = ("pdf.ark", "pdf.scp", "num_pdfs", "pdf_counts", "report.txt", "report.json")


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


# ---- inputs ---------------------------------------------------------------------------------


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


def cross_check_ali_to_pdf(
    exe: str, model: Path, ali_file: Path, ours: dict[str, np.ndarray]
) -> None:
    """Compare our map with Kaldi's ``ali-to-pdf`` on one archive (before length fixes)."""
    proc = subprocess.run(
        [exe, str(model), "ark:-", "ark,t:-"],
        input=read_gzip(ali_file),
        capture_output=True,
        check=False,
    )
    if proc.returncode != 0:
        err = proc.stderr.decode(errors="replace").strip().splitlines()[-1:]
        raise AsrdistError(f"{ali_file}: ali-to-pdf failed: {' '.join(err)}")
    for utt, pdfs in parse_int32_ark(proc.stdout, f"ali-to-pdf output for {ali_file}"):
        if utt in ours and not np.array_equal(ours[utt], pdfs):
            raise AsrdistError(
                f"{ali_file}: utterance {utt}: pdf-ids differ from ali-to-pdf's "
                "(transition model parsing disagrees with Kaldi)"
            )


# ---- the stage ------------------------------------------------------------------------------


def ingest_alignments(
    ali_dir: str | os.PathLike,
    feats_scp: str | os.PathLike,
    out_dir: str | os.PathLike,
    tolerance: int = 2,
    max_missing_fraction: float = 0.05,
) -> IngestReport | Skipped:
    """Write pdf targets for every aligned utterance of ``feats_scp`` into ``out_dir``.

    Skipped when ``out_dir`` is done with the same options and inputs
    (asrdist.stage): feats_scp and the alignment dir's num_jobs, ali.*.gz and final.mdl, not
    the rest of it (a decode dir inside it must not redo ingestion).
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
    for name in OUTPUTS:  # leftovers of an interrupted run must not look complete
        (out_dir / name).unlink(missing_ok=True)

    files = alignment_files(ali_dir)
    model = ali_dir / "final.mdl"
    info = read_transition_model(model)
    scp = read_table(feats_scp, require_value=True)
    if not scp:
        raise AsrdistError(f"{feats_scp}: empty")
    frames = frame_counts(scp, feats_scp.parent / "utt2num_frames")
    ali_to_pdf = shutil.which("ali-to-pdf")

    raw: dict[str, np.ndarray] = {}
    for ali_file in track(files, "reading alignments", "job"):
        job = {}
        for utt, tids in read_alignments(ali_file):
            if utt in raw or utt in job:
                raise AsrdistError(f"{ali_file}: utterance {utt} aligned more than once")
            job[utt] = map_to_pdfs(tids, info, utt, ali_file)
        if ali_to_pdf:
            cross_check_ali_to_pdf(ali_to_pdf, model, ali_file, job)
        raw.update(job)

    targets: dict[str, np.ndarray] = {}
    mismatch: Counter[int] = Counter()
    for utt in track(scp, "matching lengths", "utt"):
        if utt in raw:
            mismatch[int(raw[utt].size - frames[utt])] += 1
            targets[utt] = fit_length(raw[utt], frames[utt], tolerance, utt)
    missing = len(scp) - len(targets)
    if missing / len(scp) > max_missing_fraction:
        raise AsrdistError(
            f"{ali_dir}: {missing} of {len(scp)} utterances in {feats_scp} have no alignment "
            f"({100.0 * missing / len(scp):.1f}% > --max-missing {max_missing_fraction:g})"
        )
    if not targets:
        raise AsrdistError(f"{ali_dir}: no alignment matches an utterance of {feats_scp}")

    counts = np.bincount(np.concatenate(list(targets.values())), minlength=info.num_pdfs)
    report = IngestReport(
        ali_dir=str(ali_dir),
        feats_scp=str(feats_scp),
        num_utterances=len(scp),
        num_aligned=len(targets),
        num_missing=missing,
        num_without_features=sum(1 for utt in raw if utt not in scp),
        total_frames=int(counts.sum()),
        num_pdfs=info.num_pdfs,
        mismatch_histogram=dict(sorted(mismatch.items())),
        pdf_count_min=int(counts.min()),
        pdf_count_median=float(np.median(counts)),
        pdf_count_max=int(counts.max()),
        zero_count_pdfs=np.flatnonzero(counts == 0).tolist(),
        cross_checked_with_ali_to_pdf=ali_to_pdf is not None,
    )
    _write_outputs(out_dir, targets, counts, report)
    check.mark_done()
    return report


def _write_outputs(
    out_dir: Path, targets: dict[str, np.ndarray], counts: np.ndarray, report: IngestReport
) -> None:
    ark = (out_dir / "pdf.ark").resolve()
    with atomic_write(ark, "wb") as f:
        offsets = write_int32_ark(f, targets.items())
    with atomic_write(out_dir / "pdf.scp") as f:
        f.writelines(f"{utt} {ark}:{offset}\n" for utt, offset in offsets)
    with atomic_write(out_dir / "num_pdfs") as f:
        f.write(f"{report.num_pdfs}\n")
    with atomic_write(out_dir / "pdf_counts") as f:
        f.write("[ " + " ".join(str(int(c)) for c in counts) + " ]\n")
    with atomic_write(out_dir / "report.txt") as f:
        f.write(report.to_text())
    with atomic_write(out_dir / "report.json") as f:
        json.dump(asdict(report), f, indent=1)


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
