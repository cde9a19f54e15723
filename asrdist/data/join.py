"""Extra feature streams joined per frame: the papers' 260-dim input from a Kaldi user's files.

IBM's SWB-2000 BLSTM read 40 log-mel + deltas (120) + 40 fMLLR + 100 i-vector per frame
(recalled). A Kaldi user has fMLLR features as a feats.scp and online i-vectors as an scp with
one row every N frames (``ivector_online.scp``, ``--ivector-period 10``). This module appends
deltas of SRC's features as Kaldi's ``add-deltas`` does (``--delta-order``, window 2), then
pastes the streams on as ``paste-feats`` does (lengths may differ by a frame or two: the
streams are cut or their last row repeated) after repeating each row of a periodic stream N
times, as nnet3 does with ``--online-ivectors --online-ivector-period N``.

Each stream keeps its own normalisation (asrdist.kaldi.layout): SRC per speaker by default,
fMLLR and i-vectors none, as nnet3; the layout is written as ``feats_layout`` and cmvn.scp
holds every speaker's stats of the whole matrix, of which a ``spk`` range takes its columns.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

import kaldiio
import numpy as np

from asrdist.errors import AsrdistError
from asrdist.fsutil import atomic_write, copy_file
from asrdist.kaldi.ark_writer import ark_writer
from asrdist.kaldi.cmvn import cmvn_stats
from asrdist.kaldi.data_dir import c_sorted, read_table
from asrdist.kaldi.feats_config import FEATS_CONFIG
from asrdist.kaldi.gmm_feats import add_deltas
from asrdist.kaldi.layout import LAYOUT, NORMS, ColumnRange, Layout, check_layout, write_layout
from asrdist.stage import Skipped, check_done

STAGE = "join_feats"
# and feats_config.json: how SRC's columns, the first range, were made (the layout says the rest)
COPIED = ("wav.scp", "text", "utt2spk", "spk2utt", "segments", "reco2file_and_channel",
          "frame_shift", "utt2uniq", "utt2dur", "spk2gender", FEATS_CONFIG)
DELTA_WINDOW = 2  # add-deltas --delta-window's default


@dataclass(frozen=True)
class Stream:
    """An scp of matrices with one row every ``period`` frames, normalised as ``norm`` says."""

    scp: str
    period: int = 1
    norm: str = "none"

    @classmethod
    def parse(cls, spec: str) -> Stream:
        """``path.scp``, ``path.scp:N`` (one row every N frames), each optionally followed by
        ``:spk``, ``:utt`` or ``:none`` (its normalisation; none by default)."""
        path, norm = spec, "none"
        head, sep, tail = path.rpartition(":")
        if sep and tail in NORMS:
            path, norm = head, tail
        head, sep, period = path.rpartition(":")
        if sep and period.isdigit():
            path = head
        else:
            period = "1"
        if int(period) < 1:
            raise AsrdistError(f"stream {spec}: the period must be at least 1")
        if not Path(path).is_file():
            raise AsrdistError(f"stream {spec}: no such scp file")
        return cls(path, int(period), norm)


def fit(matrix: np.ndarray, period: int, frames: int, tolerance: int, what: str) -> np.ndarray:
    """A stream's rows for ``frames`` frames: rows repeated ``period`` times, then cut, or
    the last row repeated, when within ``tolerance`` frames of ``frames``."""
    rows = np.repeat(np.asarray(matrix, dtype=np.float32), period, axis=0)
    short = frames - len(rows)
    if abs(short) > tolerance:
        raise AsrdistError(f"{what}: {len(rows)} frames after expansion, the features have "
                           f"{frames} (more than --length-tolerance {tolerance} apart)")
    if short > 0:
        rows = np.concatenate([rows, np.repeat(rows[-1:], short, axis=0)])
    return rows[:frames]


def _layout(widths: list[int], src: Path, streams: list[Stream], delta_order: int,
            src_norm: str) -> Layout:
    ranges, at = [], 0
    sources = [(str(src / "feats.scp"), src_norm, delta_order)] + [
        (s.scp + (f":{s.period}" if s.period > 1 else ""), s.norm, 0) for s in streams]
    for width, (source, norm, deltas) in zip(widths, sources, strict=True):
        ranges.append(ColumnRange(at, at + width, norm, deltas, source))
        at += width
    return check_layout(ranges, "the joined features")


def join_features(src: str | os.PathLike, dest: str | os.PathLike, streams: list[Stream],
                  tolerance: int = 2, delta_order: int = 0, src_norm: str = "spk"
                  ) -> Path | Skipped:
    """Write DEST: SRC's features with their deltas up to ``delta_order`` (0: none) and
    ``streams`` pasted on per frame, feats_layout (SRC normalised as ``src_norm``, each stream
    as its own ``norm``), cmvn.scp and utt2num_frames; SRC's other tables copied. Skipped when
    DEST is done already."""
    src, dest = Path(src), Path(dest)
    if not (src / "feats.scp").is_file():
        raise AsrdistError(f"{src / 'feats.scp'}: missing (a features dir is expected)")
    if (src / LAYOUT).is_file():
        raise AsrdistError(f"{src / LAYOUT}: SRC is joined already; join onto the features "
                           "it was made from")
    if delta_order < 0:
        raise AsrdistError(f"--delta-order {delta_order}: must be 0 or more")
    if src_norm not in NORMS:
        raise AsrdistError(f"--src-norm {src_norm!r}: choose one of {', '.join(NORMS)}")
    if not streams and not delta_order:
        raise AsrdistError("nothing to join: give a stream, or --delta-order")
    options = {"streams": [(s.scp, s.period, s.norm) for s in streams], "tolerance": tolerance,
               "delta_order": delta_order, "delta_window": DELTA_WINDOW, "norm": src_norm}
    check = check_done(dest, STAGE, options, [src, *(s.scp for s in streams)])
    if check.done:
        return check.skipped()
    base = kaldiio.load_scp(str(src / "feats.scp"))
    tables = [kaldiio.load_scp(s.scp) for s in streams]
    utt2spk = read_table(src / "utt2spk", require_value=True)
    dest.mkdir(parents=True, exist_ok=True)
    ark = dest.resolve() / "data" / "joined_feats.ark"  # absolute, never a link's target
    ark.parent.mkdir(exist_ok=True)
    stats: dict[str, np.ndarray] = {}
    frames: dict[str, int] = {}
    widths: list[int] = []
    names = [f"{src / 'feats.scp'}", *(f"stream {s.scp}" for s in streams)]
    with ark_writer(ark, dest / "data" / "joined_feats.scp") as writer:
        for utt in c_sorted(base):
            feats = np.asarray(base[utt], dtype=np.float32)
            if feats.ndim != 2 or not len(feats):
                raise AsrdistError(f"{src / 'feats.scp'}: utterance {utt} has no frames")
            parts = [add_deltas(feats, delta_order, DELTA_WINDOW) if delta_order else feats]
            for stream, table in zip(streams, tables, strict=True):
                if utt not in table:
                    raise AsrdistError(f"stream {stream.scp}: no entry for utterance {utt}")
                # a periodic stream covers the last, partial period with a whole row
                slack = tolerance + stream.period - 1
                parts.append(fit(table[utt], stream.period, len(feats), slack,
                                 f"stream {stream.scp}: utterance {utt}"))
            if not widths:
                widths = [p.shape[1] for p in parts]
            for name, part, width in zip(names, parts, widths, strict=True):
                if part.shape[1] != width:
                    raise AsrdistError(f"{name}: utterance {utt} has {part.shape[1]} columns, "
                                       f"the first utterance {width}")
            joined = np.concatenate(parts, axis=1)
            writer(utt, joined)
            frames[utt] = len(joined)
            spk = utt2spk[utt]
            stats[spk] = stats.get(spk, 0) + cmvn_stats(joined)
    if not frames:
        raise AsrdistError(f"{src / 'feats.scp'}: no utterances")
    layout = _layout(widths, src, streams, delta_order, src_norm)
    with ark_writer(dest / "data" / "cmvn.ark", dest / "cmvn.scp") as w:
        for spk in c_sorted(stats):
            w(spk, stats[spk])
    for name in COPIED:
        if (src / name).is_file():
            copy_file(src / name, dest / name)
    with atomic_write(dest / "utt2num_frames") as f:
        f.writelines(f"{u} {n}\n" for u, n in frames.items())
    write_layout(dest / LAYOUT, layout)
    shutil.move(dest / "data" / "joined_feats.scp", dest / "feats.scp")
    check.mark_done(["feats.scp", LAYOUT])
    return dest
