"""Which columns of a joined feature matrix are which stream, and how each is normalised.

The papers' 260-dim input pastes streams that want different treatment: log-mel fbank with
deltas wants per-speaker CMVN; fMLLR features are speaker-normalised already; an i-vector *is*
the speaker information, so subtracting a speaker's mean i-vector removes what it is there to
carry (Kaldi's nnet3 applies no CMVN to i-vectors). ``asrdist-join-feats`` writes the layout
as ``feats_layout`` beside feats.scp; training reads it from the data dir, the trainer stores it
in final.pt, and decoding applies it from there, so all three normalise alike.

A range holding deltas (Kaldi ``add-deltas``) keeps the order ``[statics, deltas, ...]``; it is
normalised as Kaldi's ``apply-cmvn | add-deltas`` pipes it: the statics' mean is subtracted
from the statics only (deltas of a constant are zero), and with variance normalisation every
block is divided by the statics' standard deviation (deltas are linear in the statics).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from asrdist.errors import AsrdistError
from asrdist.fsutil import atomic_write
from asrdist.kaldi.cmvn import apply_cmvn, cmvn_stats

LAYOUT = "feats_layout"  # the file in a features dir
NORMS = ("spk", "utt", "none")
VAR_FLOOR = 1e-10  # as asrdist.kaldi.cmvn.apply_cmvn

HEADER = """\
# The columns of feats.scp, one range a line: begin end (0-based, end excluded), the
# normalisation the network's input applies to them (spk: CMVN per speaker from cmvn.scp;
# utt: per utterance; none), the delta order they hold (Kaldi add-deltas: statics first),
# and the stream they came from. Written by asrdist-join-feats; read by asrdist-train.
"""


@dataclass(frozen=True)
class ColumnRange:
    """Columns ``[begin, end)`` of one stream, its normalisation and its delta order."""

    begin: int
    end: int
    norm: str = "none"
    deltas: int = 0
    source: str = ""

    def __post_init__(self) -> None:
        if self.norm not in NORMS:
            raise AsrdistError(f"normalisation {self.norm!r}: choose one of {', '.join(NORMS)}")
        width = self.end - self.begin
        if self.begin < 0 or width <= 0 or self.deltas < 0 or width % (self.deltas + 1):
            raise AsrdistError(f"columns {self.begin}..{self.end} with delta order "
                               f"{self.deltas}: not a range of whole delta blocks")

    @property
    def statics(self) -> int:
        """Columns of one block (the statics; each delta order adds as many)."""
        return (self.end - self.begin) // (self.deltas + 1)


Layout = tuple[ColumnRange, ...]


def layout_dim(layout: Layout) -> int:
    """The feature dimension ``layout`` describes (its ranges tile 0..dim)."""
    return layout[-1].end


def check_layout(layout: Iterable[ColumnRange], what: str) -> Layout:
    """``layout`` as a tuple, refused (naming ``what``) unless its ranges tile 0..dim."""
    layout = tuple(layout)
    if not layout:
        raise AsrdistError(f"{what}: no column ranges")
    at = 0
    for r in layout:
        if r.begin != at:
            raise AsrdistError(f"{what}: columns {r.begin}..{r.end} do not start where the "
                               f"previous range ends ({at})")
        at = r.end
    return layout


def write_layout(path: str | os.PathLike, layout: Layout) -> None:
    """Write ``layout`` as a small text file (atomically)."""
    with atomic_write(path) as f:
        f.write(HEADER)
        f.writelines(f"{r.begin} {r.end} {r.norm} {r.deltas} {r.source}".rstrip() + "\n"
                     for r in layout)


def read_layout(data_dir: str | os.PathLike) -> Layout | None:
    """The ``feats_layout`` of a features dir; None when it has none (features not joined:
    one normalisation for every column, as before layouts existed)."""
    path = Path(data_dir) / LAYOUT
    if not path.is_file():
        return None
    ranges = []
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        fields = line.split(maxsplit=4)
        try:
            begin, end, norm, deltas = int(fields[0]), int(fields[1]), fields[2], int(fields[3])
            ranges.append(ColumnRange(begin, end, norm, deltas,
                                      fields[4] if len(fields) > 4 else ""))
        except (ValueError, IndexError) as e:
            raise AsrdistError(f"{path}:{number}: expected 'begin end norm deltas [source]', "
                               f"got {line!r}") from e
        except AsrdistError as e:
            raise AsrdistError(f"{path}:{number}: {e.message}") from e
    return check_layout(ranges, str(path))


def layout_record(layout: Layout | None) -> list[dict[str, Any]] | None:
    """``layout`` as plain data (what final.pt stores: no class needed to read it back)."""
    if layout is None:
        return None
    return [{"begin": r.begin, "end": r.end, "norm": r.norm, "deltas": r.deltas,
             "source": r.source} for r in layout]


def layout_from_record(record: Iterable[Mapping[str, Any]] | None, what: str) -> Layout | None:
    """The inverse of :func:`layout_record`."""
    if record is None:
        return None
    return check_layout((ColumnRange(**dict(r)) for r in record), what)


def same_columns(a: Layout, b: Layout) -> bool:
    """Whether two layouts cut and normalise the columns alike (their sources may differ)."""
    return [(r.begin, r.end, r.norm, r.deltas) for r in a] == [
        (r.begin, r.end, r.norm, r.deltas) for r in b]


def describe(layout: Layout) -> str:
    """One line: ``0-120 spk (deltas 2), 120-160 none, ...``."""
    return ", ".join(f"{r.begin}-{r.end} {r.norm}" + (f" (deltas {r.deltas})" if r.deltas else "")
                     for r in layout)


def needs_speaker_stats(layout: Layout) -> bool:
    """Whether cmvn.scp must be there: a data dir normalised per utterance or not at all may
    have none."""
    return any(r.norm == "spk" for r in layout)


def normalise(feats: np.ndarray, layout: Layout, spk_stats: np.ndarray | None,
              norm_vars: bool) -> np.ndarray:
    """``feats`` with each range normalised as ``layout`` says; ``spk_stats`` are the speaker's
    Kaldi CMVN stats of the whole matrix (cmvn.scp), needed only by ``spk`` ranges."""
    if feats.shape[1] != layout_dim(layout):
        raise AsrdistError(f"{feats.shape[1]} feature columns, the layout has "
                           f"{layout_dim(layout)} ({describe(layout)})")
    out = np.array(feats, dtype=np.float32)
    for r in layout:
        if r.norm == "none":
            continue
        lo, hi = r.begin, r.begin + r.statics
        if r.norm == "utt":
            stats = cmvn_stats(feats[:, lo:hi])
        else:
            if spk_stats is None:
                raise AsrdistError(f"columns {r.begin}..{r.end} need per-speaker CMVN stats")
            full = np.asarray(spk_stats, dtype=np.float64)
            if full.shape != (2, feats.shape[1] + 1):
                raise AsrdistError(f"CMVN stats of shape {full.shape} do not fit "
                                   f"{feats.shape[1]}-dim features")
            stats = np.concatenate([full[:, lo:hi], full[:, -1:]], axis=1)
        out[:, lo:hi] = apply_cmvn(feats[:, lo:hi], stats, norm_vars)
        if norm_vars and r.deltas:
            count = stats[0, -1]
            mean = stats[0, :-1] / count
            std = np.sqrt(np.maximum(stats[1, :-1] / count - mean**2, VAR_FLOOR))
            blocks = feats[:, hi:r.end].astype(np.float64).reshape(len(feats), r.deltas, -1)
            out[:, hi:r.end] = (blocks / std).reshape(len(feats), -1)
    return out
