"""A Kaldi dict dir for the tiny systems (:mod:`asrdist.testing.tiny_system`), written from
a word -> phones table.

SIL (optional silence) and SPN (for <unk>) are the silence phones; the non-silence phones
are those of the lexicon in order of first use, so the phone ids follow the table.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

SILENCE_PHONES = ("SIL", "SPN")


def write_dict(dict_dir: Path, lexicon: Mapping[str, Sequence[str]]) -> Path:
    """Write silence/nonsilence/optional-silence phone lists and lexicon.txt into dict_dir."""
    nonsilence = dict.fromkeys(p for phones in lexicon.values() for p in phones
                               if p not in SILENCE_PHONES)
    dict_dir.mkdir(parents=True, exist_ok=True)
    (dict_dir / "silence_phones.txt").write_text("".join(f"{p}\n" for p in SILENCE_PHONES))
    (dict_dir / "nonsilence_phones.txt").write_text("".join(f"{p}\n" for p in nonsilence))
    (dict_dir / "optional_silence.txt").write_text("SIL\n")
    (dict_dir / "lexicon.txt").write_text(
        "".join(f"{w} {' '.join(p)}\n" for w, p in lexicon.items()))
    return dict_dir
