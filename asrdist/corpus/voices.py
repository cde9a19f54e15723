"""The mini corpus's voices: which synthesizer speaks, with which voice, in which split.

Each synthesizer's voices are split between train and test, so a test voice is never heard in
training. A speaker id names the synthesizer first (``espeak-en-us-m1``, ``flite-slt``): the
scoring splits by it per synthesizer and per voice. Speech of every synthesizer is
transcribed with the one espeak-derived lexicon (asrdist.corpus.lexicon); flite pronounces
from the CMU dictionary, and the GMM learns that mapping like any speaker's accent.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from asrdist.corpus import espeak, flite
from asrdist.errors import AsrdistError

# espeak voice variants ("<language>+<variant>"); the two lists never share a voice.
ESPEAK_VOICES = {
    "train": ("en-us+m1", "en-us+m2", "en-us+m3", "en-us+m4", "en-us+f1", "en-us+f2", "en-us+f3",
              "en-us+robert", "en-us+steph", "en-us+david", "en+m5", "en+m6", "en+f4"),
    "test": ("en-us+m7", "en-us+f5", "en+m8", "en-us+edward"),
}
# kal and kal16 are one speaker (8 and 16 kHz diphones), so both train. slt, flite's one
# female voice, trains too: held out, nothing female of flite's was heard in training and
# both models failed on it (GMM 93 %, BLSTM 77 % WER), which tells more about the split than
# about the models. rms (male, clustergen like awb and slt) is the unseen flite voice.
FLITE_VOICES = {"train": ("awb", "kal", "kal16", "slt"), "test": ("rms",)}
SYNTHESIZERS = {"espeak": ESPEAK_VOICES, "flite": FLITE_VOICES}
NORMAL_WPM = 175  # espeak's default rate; flite's duration_stretch 1.0 is taken to match it


@dataclass(frozen=True)
class Voice:
    synth: str  # "espeak" or "flite"
    name: str  # the synthesizer's voice, e.g. "en-us+m3" or "slt"

    @property
    def speaker(self) -> str:
        """Kaldi speaker id: synthesizer, then voice (``+`` would be odd in an id)."""
        return f"{self.synth}-{self.name.replace('+', '-')}"


def check_synthesizers(synths: tuple[str, ...]) -> None:
    unknown = [s for s in synths if s not in SYNTHESIZERS]
    if not synths or unknown or len(set(synths)) != len(synths):
        raise AsrdistError(f"--synthesizers {','.join(synths)}: give distinct names among "
                           f"{', '.join(SYNTHESIZERS)}")


def voices(split: str, synths: tuple[str, ...] = tuple(SYNTHESIZERS)) -> list[list[Voice]]:
    """The voices of ``split``, one list per synthesizer of ``synths``."""
    check_synthesizers(synths)
    return [[Voice(s, name) for name in SYNTHESIZERS[s][split]] for s in synths]


def voice_of(index: int, groups: list[list[Voice]]) -> Voice:
    """Utterance ``index``'s voice: synthesizers take turns, each cycling through its voices,
    so every synthesizer speaks an equal share of a split."""
    group = groups[index % len(groups)]
    return group[(index // len(groups)) % len(group)]


def speak(text: str, voice: Voice, rate_wpm: int, pitch: int, sample_rate: int) -> np.ndarray:
    """float32 speech at ``sample_rate``; flite has no pitch control here (its voices keep
    their own), its rate comes from ``rate_wpm`` as a duration stretch."""
    if voice.synth == "flite":
        return flite.synthesize(text, voice.name, stretch=NORMAL_WPM / rate_wpm,
                                sample_rate=sample_rate)
    return espeak.synthesize(text, voice.name, rate=rate_wpm, pitch=pitch,
                             sample_rate=sample_rate)
