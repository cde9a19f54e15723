from __future__ import annotations

import numpy as np
import pytest

from asrdist.corpus import pico
from asrdist.errors import AsrdistError

TEXT = "my brother painted the red door"


@pytest.mark.parametrize("voice", pico.VOICES)
def test_every_voice_speaks_at_the_corpus_rate(voice):
    audio = pico.synthesize(TEXT, voice, sample_rate=8000)
    assert audio.dtype == np.float32 and 1.0 < audio.size / 8000 < 4.0
    assert 0.05 < np.abs(audio).max() <= 1.0


def test_rate_and_pitch_change_the_speech():
    normal = pico.synthesize(TEXT, "en-US")
    slow = pico.synthesize(TEXT, "en-US", rate_percent=70)
    assert 1.2 < slow.size / normal.size < 1.7
    high = pico.synthesize(TEXT, "en-US", pitch_percent=120)
    again = pico.synthesize(TEXT, "en-US")
    np.testing.assert_array_equal(normal, again)  # reproducible, and no setting sticks
    assert high.size != normal.size or not np.array_equal(high, normal)


def test_unknown_voice_is_a_clear_error():
    with pytest.raises(AsrdistError, match="pico has no voice 'en-AU'"):
        pico.synthesize(TEXT, "en-AU")
