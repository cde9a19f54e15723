"""From a decode dir's CTM to the one Kaldi's local/score_sclite.sh hands hubscr.pl.

asrdist-decode writes times relative to each utterance (``utt 1 start dur word``); NIST
scoring wants them relative to the recording, with the LDC file id and channel
(``en_4156 A 12.34 0.20 word``): Kaldi's ``utils/convert_ctm.pl`` with the data dir's
``segments`` and ``reco2file_and_channel``. Then score_sclite.sh's filter drops what a
reference never counts: noise and laughter markers, ``<unk>``, hesitations and partial words
(the list is this project's recollection of the script, marked as such).
"""

from __future__ import annotations

import os
from pathlib import Path

from asrdist.errors import AsrdistError
from asrdist.fsutil import atomic_write
from asrdist.kaldi.data_dir import read_table

# recalled from egs/swbd/s5c/local/score_sclite.sh (not copied)
HESITATIONS = {"uh", "um", "eh", "mm", "hm", "ah", "huh", "ha", "er", "oof", "hee", "ach", "eee",
               "ew"}
DROPPED = {"[noise]", "[laughter]", "[vocalized-noise]", "<unk>"}


def kept(word: str) -> bool:
    """Whether score_sclite.sh's filter keeps a hypothesis word."""
    w = word.lower()
    return w not in DROPPED and w not in HESITATIONS and not w.endswith("-")


def recording_ctm(ctm: str | os.PathLike, data_dir: str | os.PathLike) -> list[str]:
    """Utterance-relative CTM lines -> filtered ``file chan start dur word`` lines, sorted."""
    data_dir = Path(data_dir)
    segments = read_table(data_dir / "segments", require_value=True)
    reco2fc = read_table(data_dir / "reco2file_and_channel", require_value=True)
    out = []
    for n, line in enumerate(Path(ctm).read_text().splitlines(), 1):
        fields = line.split()
        if not fields:
            continue
        if len(fields) < 5 or fields[0] not in segments:
            raise AsrdistError(f"{ctm}:{n}: utterance {fields[0]!r} is not in "
                               f"{data_dir / 'segments'}")
        reco, start = segments[fields[0]].split()[:2]
        file, chan = reco2fc[reco].split()[:2]
        if kept(fields[4]):
            t = float(start) + float(fields[2])
            out.append((file, chan, t, f"{file} {chan} {t:.2f} {fields[3]} {fields[4]}"))
    return [line for *_, line in sorted(out, key=lambda x: (x[0], x[1], x[2]))]


def write_recording_ctm(ctm: str | os.PathLike, data_dir: str | os.PathLike,
                        dest: str | os.PathLike) -> Path:
    """Write :func:`recording_ctm` to ``dest``."""
    with atomic_write(dest) as f:
        f.writelines(line + "\n" for line in recording_ctm(ctm, data_dir))
    return Path(dest)
