"""libespeak-ng called in-process through ctypes: speech synthesis and word phonemes.

Running the espeak-ng binary once per utterance costs a process start each time; the library
synthesizes a sentence in a few milliseconds. libespeak-ng keeps global state (one voice, one
callback), so one :class:`Espeak` exists per process (:func:`get_espeak`).
"""

from __future__ import annotations

import ctypes
import functools
import os

import numpy as np
import torch
from lhotse.augmentation.resample import Resample

from asrdist.errors import AsrdistError

LIBRARY_NAME = "libespeak-ng.so.1"
_AUDIO_OUTPUT_SYNCHRONOUS = 2
_CHARS_UTF8 = 1
_POS_CHARACTER = 1
_PARAM_RATE = 1
_PARAM_PITCH = 3
_EE_OK = 0

_SynthCallback = ctypes.CFUNCTYPE(
    ctypes.c_int, ctypes.POINTER(ctypes.c_short), ctypes.c_int, ctypes.c_void_p
)


def _load_library() -> ctypes.CDLL:
    try:
        lib = ctypes.CDLL(LIBRARY_NAME)
    except OSError as exc:
        raise AsrdistError(
            f"libespeak-ng not found ({LIBRARY_NAME}: {exc}): apt-get install libespeak-ng1"
        ) from exc
    lib.espeak_Initialize.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_char_p, ctypes.c_int]
    lib.espeak_Initialize.restype = ctypes.c_int
    lib.espeak_SetSynthCallback.argtypes = [_SynthCallback]
    lib.espeak_SetSynthCallback.restype = None
    lib.espeak_SetVoiceByName.argtypes = [ctypes.c_char_p]
    lib.espeak_SetVoiceByName.restype = ctypes.c_int
    lib.espeak_SetParameter.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int]
    lib.espeak_SetParameter.restype = ctypes.c_int
    lib.espeak_Synth.argtypes = [
        ctypes.c_char_p, ctypes.c_size_t, ctypes.c_uint, ctypes.c_int, ctypes.c_uint,
        ctypes.c_uint, ctypes.c_void_p, ctypes.c_void_p,
    ]
    lib.espeak_Synth.restype = ctypes.c_int
    lib.espeak_Synchronize.argtypes = []
    lib.espeak_Synchronize.restype = ctypes.c_int
    lib.espeak_TextToPhonemes.argtypes = [
        ctypes.POINTER(ctypes.c_char_p), ctypes.c_int, ctypes.c_int
    ]
    lib.espeak_TextToPhonemes.restype = ctypes.c_char_p
    return lib


class Espeak:
    """One initialised libespeak-ng: synthesize text, translate words to phonemes."""

    def __init__(self) -> None:
        self._lib = _load_library()
        rate = self._lib.espeak_Initialize(_AUDIO_OUTPUT_SYNCHRONOUS, 0, None, 0)
        if rate <= 0:
            raise AsrdistError("libespeak-ng failed to initialise (is espeak-ng-data installed?)")
        self.native_rate: int = rate
        self._chunks: list[np.ndarray] = []
        # Kept on the instance: ctypes must not free the callback while the library holds it.
        self._callback = _SynthCallback(self._collect)
        self._lib.espeak_SetSynthCallback(self._callback)
        self._voice: str | None = None

    def _collect(self, wav, num_samples: int, _events) -> int:
        if wav and num_samples > 0:
            self._chunks.append(np.ctypeslib.as_array(wav, shape=(num_samples,)).copy())
        return 0

    def set_voice(self, voice: str) -> None:
        """Select a voice such as ``en-us`` or a variant such as ``en-us+f3``."""
        if voice == self._voice:
            return
        if self._lib.espeak_SetVoiceByName(voice.encode()) != _EE_OK:
            raise AsrdistError(f"espeak-ng has no voice {voice!r} (see espeak-ng --voices)")
        self._voice = voice

    def synthesize(self, text: str, voice: str, rate: int = 175, pitch: int = 50) -> np.ndarray:
        """Speak ``text``; returns int16 samples at :attr:`native_rate` (22050 Hz).

        ``rate`` is words per minute (80-450), ``pitch`` the base pitch (0-100, 50 normal).
        """
        self.set_voice(voice)
        self._lib.espeak_SetParameter(_PARAM_RATE, int(rate), 0)
        self._lib.espeak_SetParameter(_PARAM_PITCH, int(pitch), 0)
        self._chunks = []
        data = text.encode()
        status = self._lib.espeak_Synth(
            data, len(data) + 1, 0, _POS_CHARACTER, 0, _CHARS_UTF8, None, None
        )
        self._lib.espeak_Synchronize()
        if status != _EE_OK:
            raise AsrdistError(f"espeak-ng failed (status {status}) on text {text!r}")
        if not self._chunks:
            return np.zeros(0, dtype=np.int16)
        return np.concatenate(self._chunks)

    def phonemes(self, word: str, voice: str = "en-us") -> list[str]:
        """espeak's ASCII phoneme names for ``word`` (stress marks still attached)."""
        self.set_voice(voice)
        pointer = ctypes.c_char_p(word.encode())
        separator = ord(" ") << 8
        names: list[str] = []
        # One call translates up to a clause boundary; loop until the text is consumed.
        while pointer.value:
            out = self._lib.espeak_TextToPhonemes(ctypes.byref(pointer), _CHARS_UTF8, separator)
            if out:
                names += out.decode().split()
        return names


_instance: tuple[int, Espeak] | None = None


def get_espeak() -> Espeak:
    """The process's :class:`Espeak` (made on first use, and again in a forked child)."""
    global _instance
    if _instance is None or _instance[0] != os.getpid():
        _instance = (os.getpid(), Espeak())
    return _instance[1]


@functools.lru_cache(maxsize=8)
def _resampler(orig_rate: int, new_rate: int) -> Resample:
    return Resample(orig_rate, new_rate)


def resample(samples: np.ndarray, orig_rate: int, new_rate: int) -> np.ndarray:
    """Band-limited (windowed-sinc) resampling of a 1-D float signal; returns float32."""
    samples = np.asarray(samples, dtype=np.float32)
    if orig_rate == new_rate:
        return samples
    with torch.no_grad():
        out = _resampler(orig_rate, new_rate)(torch.from_numpy(samples)[None])[0]
    return out.numpy()


def synthesize(
    text: str, voice: str, rate: int = 175, pitch: int = 50, sample_rate: int = 16000
) -> np.ndarray:
    """Speak ``text`` and return float32 samples in [-1, 1] at ``sample_rate``."""
    engine = get_espeak()
    native = engine.synthesize(text, voice, rate=rate, pitch=pitch)
    return resample(native.astype(np.float32) / 32768.0, engine.native_rate, sample_rate)
