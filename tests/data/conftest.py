"""Fixtures for the corpus and feature tests (tiny synthetic data, made on the spot)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import soundfile

from asrdist.kaldi.data_dir import Utterance, write_data_dir

# Utterance lengths in samples: the shortest possible (one frame), odd sizes, a few seconds.
FEAT_SRC_LENGTHS = {
    "spkA-001": 400, "spkA-002": 16000, "spkA-003": 5123,
    "spkB-001": 22222, "spkB-002": 559, "spkB-003": 40000,
}


@pytest.fixture
def feat_src_lengths() -> dict[str, int]:
    """Samples per utterance of ``feat_src_dir``."""
    return dict(FEAT_SRC_LENGTHS)


@pytest.fixture
def feat_src_dir(tmp_path: Path) -> Path:
    """A Kaldi data dir of six 16 kHz int16 wavs (two speakers) with noisy tones."""
    rng = np.random.default_rng(7)
    utts = []
    for utt, n in FEAT_SRC_LENGTHS.items():
        t = np.arange(n) / 16000
        audio = 3000 * np.sin(2 * np.pi * rng.uniform(200, 2000) * t) + 300 * rng.standard_normal(n)
        wav = tmp_path / "wav" / f"{utt}.wav"
        wav.parent.mkdir(exist_ok=True)
        soundfile.write(wav, audio.astype(np.int16), 16000, "PCM_16")
        utts.append(Utterance(utt, utt[:4], "some words", str(wav)))
    write_data_dir(tmp_path / "src", utts)
    return tmp_path / "src"
