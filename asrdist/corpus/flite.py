"""libflite (CMU Flite) called in-process through ctypes: a second synthesizer for the mini corpus.

A corpus spoken by one synthesizer teaches a model that synthesizer, not speech; flite's voices
(Debian ``libflite1``: kal and kal16 diphone voices, awb, rms and slt) sound nothing like
espeak-ng's formant synthesis. Each voice is its own shared library that registers a
``cst_voice``; the speaking rate is a voice feature (``duration_stretch``) set before each
utterance.
"""

from __future__ import annotations

import ctypes
import functools
import os

import numpy as np

from asrdist.corpus.espeak import resample
from asrdist.errors import AsrdistError

LIBRARY_NAME = "libflite.so.1"
APT_PACKAGE = "libflite1"
VOICES = ("kal", "kal16", "awb", "rms", "slt")
_FEATURES_OFFSET = ctypes.sizeof(ctypes.c_void_p)  # cst_voice: {const char *name; features; ...}


class _CstWave(ctypes.Structure):
    _fields_ = [
        ("type", ctypes.c_char_p),
        ("sample_rate", ctypes.c_int),
        ("num_samples", ctypes.c_int),
        ("num_channels", ctypes.c_int),
        ("samples", ctypes.POINTER(ctypes.c_short)),
    ]


def _load(name: str) -> ctypes.CDLL:
    try:
        # RTLD_GLOBAL: the voice libraries resolve libflite's symbols through it.
        return ctypes.CDLL(name, mode=ctypes.RTLD_GLOBAL)
    except OSError as exc:
        raise AsrdistError(f"flite library not found ({name}: {exc}): "
                           f"apt-get install {APT_PACKAGE}") from exc


class Flite:
    """One initialised libflite and the voices registered so far."""

    def __init__(self) -> None:
        self._lib = _load(LIBRARY_NAME)
        self._lib.flite_init.restype = ctypes.c_int
        self._lib.flite_text_to_wave.argtypes = [ctypes.c_char_p, ctypes.c_void_p]
        self._lib.flite_text_to_wave.restype = ctypes.POINTER(_CstWave)
        self._lib.delete_wave.argtypes = [ctypes.POINTER(_CstWave)]
        self._lib.delete_wave.restype = None
        self._lib.feat_set_float.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_float]
        self._lib.feat_set_float.restype = None
        self._lib.flite_init()
        self._voices: dict[str, int] = {}
        self._voice_libs: list[ctypes.CDLL] = []  # kept loaded while their voices are in use

    def voice(self, name: str) -> int:
        """The registered ``cst_voice *`` of ``name`` (one of :data:`VOICES`)."""
        if name not in self._voices:
            if name not in VOICES:
                raise AsrdistError(f"flite has no voice {name!r} (one of {', '.join(VOICES)})")
            lib = _load(f"libflite_cmu_us_{name}.so.1")
            register = getattr(lib, f"register_cmu_us_{name}")
            register.argtypes = [ctypes.c_char_p]
            register.restype = ctypes.c_void_p
            pointer = register(None)
            if not pointer:
                raise AsrdistError(f"flite voice {name} failed to register")
            self._voice_libs.append(lib)
            self._voices[name] = pointer
        return self._voices[name]

    def synthesize(self, text: str, voice: str, stretch: float = 1.0) -> tuple[np.ndarray, int]:
        """Speak ``text``: int16 samples and their rate (8 kHz for kal, 16 kHz for the others).

        ``stretch`` > 1 speaks slower.
        """
        pointer = self.voice(voice)
        features = ctypes.c_void_p.from_address(pointer + _FEATURES_OFFSET).value
        self._lib.feat_set_float(features, b"duration_stretch", float(stretch))
        wave = self._lib.flite_text_to_wave(text.encode(), pointer)
        if not wave:
            raise AsrdistError(f"flite failed on text {text!r} (voice {voice})")
        try:
            w = wave.contents
            if w.num_channels != 1:
                raise AsrdistError(f"flite voice {voice} gave {w.num_channels} channels")
            samples = np.ctypeslib.as_array(w.samples, shape=(w.num_samples,)).copy() \
                if w.num_samples > 0 else np.zeros(0, dtype=np.int16)
            return samples, int(w.sample_rate)
        finally:
            self._lib.delete_wave(wave)


@functools.cache
def _flite_of(pid: int) -> Flite:
    return Flite()


def get_flite() -> Flite:
    """The process's :class:`Flite` (made on first use, and again in a forked child: the
    library's state does not survive a fork)."""
    return _flite_of(os.getpid())


def synthesize(text: str, voice: str, stretch: float = 1.0, sample_rate: int = 16000) -> np.ndarray:
    """Speak ``text`` and return float32 samples in [-1, 1] at ``sample_rate``."""
    native, rate = get_flite().synthesize(text, voice, stretch)
    return resample(native.astype(np.float32) / 32768.0, rate, sample_rate)
