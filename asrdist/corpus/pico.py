"""SVOX Pico (PyPI ``ttspico``, Apache 2.0), a third synthesizer for the mini corpus.

Pico is an HMM-based statistical parametric synthesizer, as flite's clustergen voices are, but
trained on other speakers with its own front end. It has two English voices, both female:
en-US (lh0) and en-GB (kh0). Rate and pitch are percentages of the voice's own (100 = as
built), set per utterance; the output is 16 kHz, at a volume that does not clip.
"""

from __future__ import annotations

import numpy as np

from asrdist.corpus.espeak import resample
from asrdist.errors import AsrdistError

VOICES = ("en-US", "en-GB")
NATIVE_RATE = 16000
VOLUME_PERCENT = 60  # at the voices' own 100 % pico clips its 16-bit output


def _engine(voice: str):  # noqa: ANN202 - ttspico has no type hints
    """A fresh engine: pico draws its unvoiced excitation from a generator seeded when the
    engine is made, so one engine per utterance makes an utterance's audio reproducible
    (about 20 ms and 30 kB that the library does not give back)."""
    try:
        import ttspico
    except ImportError as exc:
        raise AsrdistError(f"SVOX Pico is not installed ({exc}): pip install ttspico") from exc
    try:
        return ttspico.TtsEngine(voice)
    except RuntimeError as exc:
        raise AsrdistError(f"pico voice {voice!r}: {exc}") from exc


def synthesize(text: str, voice: str, rate_percent: int = 100, pitch_percent: int = 100,
               sample_rate: int = 16000) -> np.ndarray:
    """Speak ``text`` and return float32 samples in [-1, 1] at ``sample_rate``."""
    if voice not in VOICES:
        raise AsrdistError(f"pico has no voice {voice!r}; it has {', '.join(VOICES)}")
    engine = _engine(voice)
    engine.rate, engine.pitch = int(rate_percent), int(pitch_percent)
    engine.volume = VOLUME_PERCENT
    pcm = engine.speak(text) or b""
    samples = np.frombuffer(pcm, dtype=np.int16).astype(np.float32) / 32768.0
    return resample(samples, NATIVE_RATE, sample_rate)
