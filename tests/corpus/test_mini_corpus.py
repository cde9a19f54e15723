from __future__ import annotations

import numpy as np
import pytest

from asrdist.corpus.mini_corpus import CorpusOptions, render_utterance
from asrdist.corpus.voices import Voice
from asrdist.errors import AsrdistError


def test_rendered_utterance_is_padded_noisy_speech_and_reproducible():
    text = "my brother painted the red door"
    voice = Voice("espeak", "en-us+m1")
    audio = render_utterance(text, voice, np.random.default_rng([0, 1, 5]), 16000)
    # espeak keeps a little state between calls (a few samples of length, tiny waveform
    # details), so a second render matches in its random choices, not bit for bit.
    again = render_utterance(text, voice, np.random.default_rng([0, 1, 5]), 16000)
    assert audio.dtype == np.int16
    assert abs(audio.size - again.size) < 160
    x = audio.astype(np.float64)
    head = x[:1600]  # the first 0.1 s is always padding: noise only
    head_again = again[:1600].astype(np.float64)
    np.testing.assert_allclose(head / np.std(head), head_again / np.std(head_again), atol=0.05)
    assert np.std(head) > 0
    snr_db = 10 * np.log10(np.mean(x**2) / np.mean(head**2))
    assert 10 < snr_db < 45
    assert 1.0 < audio.size / 16000 < 6.0


def test_conflicting_test_size_options_are_refused():
    with pytest.raises(AsrdistError, match="--test-hours or --test-utts"):
        CorpusOptions(test_hours=0.1, test_utts=5)
    with pytest.raises(AsrdistError, match="--hours"):
        CorpusOptions(hours=0)


def test_flite_utterance_is_rendered_and_reproducible():
    text = "my brother painted the red door"
    voice = Voice("flite", "kal16")
    audio = render_utterance(text, voice, np.random.default_rng([0, 1, 6]), 16000)
    again = render_utterance(text, voice, np.random.default_rng([0, 1, 6]), 16000)
    np.testing.assert_array_equal(audio, again)  # flite keeps no state between utterances
    assert audio.dtype == np.int16 and 1.0 < audio.size / 16000 < 6.0
