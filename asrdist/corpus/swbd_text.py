"""Switchboard, Fisher and eval2000 transcripts as Kaldi's recipes normalise them, and their ids.

The rules are this project's reading of Kaldi's ``local/swbd1_data_prep.sh`` with
``swbd1_map_words.pl`` (compared with s5c's script, not copied), ``fisher_data_prep.sh`` and
``eval2000_data_prep.sh`` (recalled):

- MS98: ``[silence]`` goes; ``[noise]``, ``[laughter]``, ``[vocalized-noise]`` stay as words (the
  Kaldi lexicon has them); ``[laughter-yes]`` becomes ``yes``; a partial word keeps what was
  said, ``th[e]-`` -> ``th-`` and ``-[th]at`` -> ``-at`` (the dash may be missing in the
  input); ``[bocce/botchy]`` keeps the first form (a partial word in it is cut as above:
  ``[lem[guini]-/linguini]`` -> ``lem-``); ``{coinage}`` loses its braces; ``them_1's``
  becomes ``them's``; asides
  ``<b_aside>``/``<e_aside>`` go. Hesitations (``uh``, ``um``) are words; scoring filters them.
- Fisher: ``((words))`` (uncertain) keeps the words; ``[laugh]`` -> ``[laughter]``,
  ``[noise]``/``[lipsmack]``/``[sigh]``/``[cough]``/``[breath]`` -> ``[noise]``.
- Ids are Kaldi's: recording-channel, then start and end in centiseconds, six digits:
  ``sw02001-A_000098-001156``; the speaker is the recording-channel (``sw02001-A``); a
  speed-perturbed copy is prefixed ``sp0.9-`` (utterance, speaker and recording).
"""

from __future__ import annotations

import re

MS98_KEPT_NOISES = {"[noise]", "[laughter]", "[vocalized-noise]"}
FISHER_NOISES = {"[laugh]": "[laughter]", "[laughter]": "[laughter]", "[noise]": "[noise]",
                 "[lipsmack]": "[noise]", "[sigh]": "[noise]", "[cough]": "[noise]",
                 "[breath]": "[noise]", "[mn]": "[noise]"}


def _ms98_word(word: str) -> str | None:
    if word in MS98_KEPT_NOISES:
        return word
    if word == "[silence]" or word in {"<b_aside>", "<e_aside>"}:
        return None
    word = re.sub(r"^(-?)\[laughter-(.+)\](-?)$", r"\1\2\3", word)  # [laughter-yes] -> yes
    word = re.sub(r"^\[(.+)/.+\](-?)$", r"\1\2", word)  # [it'n/isn't] -> it'n
    word = re.sub(r"^-?\[[^][]+\](.+)$", r"-\1", word)  # -[th]at (dash optional) -> -at
    word = re.sub(r"^(.+)\[[^][]+\]-?$", r"\1-", word)  # th[e]- (dash optional) -> th-
    word = re.sub(r"^\{(.+)\}$", r"\1", word)  # {coinage} -> coinage
    word = re.sub(r"_\d", "", word, count=1)  # them_1's -> them's
    return word or None


def normalise_ms98(words: list[str]) -> list[str]:
    """An MS98 segment's words as Kaldi's training text."""
    out = (_ms98_word(w.lower()) for w in words)
    return [w for w in out if w]


def normalise_fisher(text: str) -> list[str]:
    """A Fisher transcript line's words as Kaldi's fisher_data_prep.sh leaves them."""
    text = text.lower().replace("((", " ").replace("))", " ")
    words = []
    for word in text.split():
        if word.startswith("["):
            word = FISHER_NOISES.get(word, "[noise]")
        words.append(word)
    return words


def centiseconds(seconds: float) -> int:
    """Kaldi's rounding of a segment time to the 10 ms of its id."""
    return int(100 * seconds + 0.5)


def utt_id(recording: str, channel: str, start: float, end: float) -> str:
    """``sw02001-A_000098-001156``: recording-channel, start and end in centiseconds."""
    return f"{recording}-{channel}_{centiseconds(start):06d}-{centiseconds(end):06d}"


def swbd_recording(ms98_segment_id: str) -> tuple[str, str]:
    """MS98 ``sw2001A-ms98-a-0001`` -> (``sw02001``, ``A``): Kaldi pads the number to 5 digits."""
    m = re.fullmatch(r"sw(\d{4})([AB])-ms98-a-\d+", ms98_segment_id)
    if not m:
        raise ValueError(ms98_segment_id)
    return f"sw0{m.group(1)}", m.group(2)


def speed_prefix(factor: float) -> str:
    """``sp0.9-``, ``sp1.0-``: Kaldi's perturb_data_dir_speed.sh prefix for a speed factor."""
    return f"sp{float(factor)}-"
