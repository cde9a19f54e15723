"""Extra feature streams joined per frame: the papers' 260-dim input from a Kaldi user's files.

IBM's SWB-2000 BLSTM read 40 fMLLR + 100 i-vector + 40 log-mel (+ deltas) per frame (recalled).
A Kaldi user has fMLLR features as a feats.scp and online i-vectors as an scp with one row
every N frames (``ivector_online.scp``, ``--ivector-period 10``). This module pastes them onto
a features dir as Kaldi's ``paste-feats`` does (lengths may differ by a frame or two: the
streams are cut or their last row repeated) after repeating each row of a periodic stream N
times, as nnet3 does with ``--online-ivectors --online-ivector-period N``.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

import kaldiio
import numpy as np

from asrdist.errors import AsrdistError
from asrdist.fsutil import atomic_write
from asrdist.kaldi.cmvn import cmvn_stats
from asrdist.kaldi.data_dir import c_sorted, read_table
from asrdist.stage import Skipped, check_done

STAGE = "join_feats"
COPIED = ("wav.scp", "text", "utt2spk", "spk2utt", "segments", "reco2file_and_channel",
          "frame_shift")


@dataclass(frozen=True)
class Stream:
    """An scp of matrices with one row every ``period`` frames."""

    scp: str
    period: int = 1

    @classmethod
    def parse(cls, spec: str) -> Stream:
        """``path.scp`` or ``path.scp:N`` (one row every N frames)."""
        path, sep, period = spec.rpartition(":")
        if not sep or not period.isdigit():
            path, period = spec, "1"
        if int(period) < 1:
            raise AsrdistError(f"stream {spec}: the period must be at least 1")
        if not Path(path).is_file():
            raise AsrdistError(f"stream {spec}: no such scp file")
        return cls(path, int(period))


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


def join_features(src: str | os.PathLike, dest: str | os.PathLike, streams: list[Stream],
                  tolerance: int = 2) -> Path | Skipped:
    """Write DEST: SRC's features with ``streams`` pasted on per frame, new cmvn.scp and
    utt2num_frames, SRC's other tables copied. False when DEST is done already."""
    src, dest = Path(src), Path(dest)
    if not (src / "feats.scp").is_file():
        raise AsrdistError(f"{src / 'feats.scp'}: missing (a features dir is expected)")
    options = {"streams": [(s.scp, s.period) for s in streams], "tolerance": tolerance}
    check = check_done(dest, STAGE, options, [src, *(s.scp for s in streams)])
    if check.done:
        return check.skipped()
    base = kaldiio.load_scp(str(src / "feats.scp"))
    tables = [kaldiio.load_scp(s.scp) for s in streams]
    utt2spk = read_table(src / "utt2spk", require_value=True)
    dest.mkdir(parents=True, exist_ok=True)
    ark = (dest / "data" / "joined_feats.ark").resolve()
    ark.parent.mkdir(exist_ok=True)
    stats: dict[str, np.ndarray] = {}
    frames: dict[str, int] = {}
    with kaldiio.WriteHelper(f"ark,scp:{ark},{dest / 'data' / 'joined_feats.scp'}") as writer:
        for utt in c_sorted(base):
            feats = np.asarray(base[utt], dtype=np.float32)
            parts = [feats]
            for stream, table in zip(streams, tables, strict=True):
                if utt not in table:
                    raise AsrdistError(f"stream {stream.scp}: no entry for utterance {utt}")
                # a periodic stream covers the last, partial period with a whole row
                slack = tolerance + stream.period - 1
                parts.append(fit(table[utt], stream.period, len(feats), slack,
                                 f"stream {stream.scp}: utterance {utt}"))
            joined = np.concatenate(parts, axis=1)
            writer(utt, joined)
            frames[utt] = len(joined)
            spk = utt2spk[utt]
            stats[spk] = stats.get(spk, 0) + cmvn_stats(joined)
    with kaldiio.WriteHelper(f"ark,scp:{dest / 'data' / 'cmvn.ark'},{dest / 'cmvn.scp'}") as w:
        for spk in c_sorted(stats):
            w(spk, stats[spk])
    for name in COPIED:
        if (src / name).is_file():
            shutil.copyfile(src / name, dest / name)
    with atomic_write(dest / "utt2num_frames") as f:
        f.writelines(f"{u} {n}\n" for u, n in frames.items())
    shutil.move(dest / "data" / "joined_feats.scp", dest / "feats.scp")
    check.mark_done(["feats.scp"])
    return dest
