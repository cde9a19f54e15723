from __future__ import annotations

import numpy as np
import pytest

from asrdist.corpus import espeak
from asrdist.errors import AsrdistError


def test_synthesize_gives_non_silent_audio_of_plausible_duration():
    text = "the farmer painted the old wooden fence yesterday"
    audio = espeak.synthesize(text, "en-us+f3", rate=175, pitch=50, sample_rate=16000)
    assert audio.dtype == np.float32
    seconds = audio.size / 16000
    assert 1.5 < seconds < 6.0  # 8 words at 175 words per minute is about 2.7 s
    assert np.max(np.abs(audio)) > 0.05
    assert np.sqrt(np.mean(audio**2)) > 0.01


def test_native_rate_and_resampled_length_agree():
    engine = espeak.get_espeak()
    native = engine.synthesize("hello world", "en-us", rate=175, pitch=50)
    assert engine.native_rate == 22050
    assert native.dtype == np.int16
    resampled = espeak.resample(native.astype(np.float32), 22050, 16000)
    assert abs(resampled.size - native.size * 16000 / 22050) <= 2


def test_faster_rate_gives_shorter_audio():
    text = "a quiet child carried the heavy basket across the bridge"
    slow = espeak.synthesize(text, "en-us+m3", rate=120)
    fast = espeak.synthesize(text, "en-us+m3", rate=240)
    assert fast.size < 0.75 * slow.size


def test_resample_keeps_a_tone_at_its_frequency():
    t = np.arange(22050) / 22050
    out = espeak.resample(np.sin(2 * np.pi * 1000 * t), 22050, 16000)
    spectrum = np.abs(np.fft.rfft(out))
    peak_hz = np.argmax(spectrum) * 16000 / out.size
    assert abs(peak_hz - 1000) < 2


def test_phonemes_of_a_word():
    assert espeak.get_espeak().phonemes("hello", "en-us") == ["h", "@", "l", "'oU"]


def test_unknown_voice_is_a_clear_error():
    with pytest.raises(AsrdistError, match="no voice 'xx-nope'"):
        espeak.synthesize("hello", "xx-nope")


def test_missing_library_names_the_debian_package(monkeypatch):
    monkeypatch.setattr(espeak, "LIBRARY_NAME", "libespeak-ng-missing.so.9")
    with pytest.raises(AsrdistError, match="apt-get install libespeak-ng1"):
        espeak._load_library()
