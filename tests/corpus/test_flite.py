from __future__ import annotations

import ctypes

import numpy as np
import pytest

from asrdist.corpus import flite
from asrdist.errors import AsrdistError


@pytest.mark.parametrize("voice", flite.VOICES)
def test_every_voice_speaks_at_the_corpus_rate(voice):
    audio = flite.synthesize("the red door", voice, sample_rate=16000)
    assert audio.dtype == np.float32 and 0.4 < audio.size / 16000 < 3.0
    assert 0.05 < np.abs(audio).max() <= 1.0


def test_duration_stretch_slows_the_voice_down():
    normal = flite.synthesize("my brother painted the red door", "kal16", stretch=1.0)
    slow = flite.synthesize("my brother painted the red door", "kal16", stretch=1.5)
    assert 1.3 < slow.size / normal.size < 1.7


def test_native_rates_are_reported():
    engine = flite.get_flite()
    assert engine.synthesize("yes", "kal")[1] == 8000
    assert engine.synthesize("yes", "slt")[1] == 16000


def test_unknown_voice_and_missing_library_are_clear_errors(monkeypatch):
    with pytest.raises(AsrdistError, match="flite has no voice 'festival'"):
        flite.get_flite().voice("festival")

    def missing(name, mode=0):
        raise OSError(f"{name}: cannot open shared object file")

    monkeypatch.setattr(ctypes, "CDLL", missing)
    with pytest.raises(AsrdistError, match="apt-get install libflite1"):
        flite.Flite()
