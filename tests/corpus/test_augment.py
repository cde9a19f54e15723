from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import soundfile

from asrdist.corpus.augment import (
    AugmentOptions,
    add_noise,
    augment_data_dir,
    reverberate,
    synthetic_rir,
)
from asrdist.errors import AsrdistError
from asrdist.kaldi.data_dir import Utterance, read_table, validate_data_dir, write_data_dir
from asrdist.stage import Skipped

RATE = 16000


def _speechlike(rng: np.random.Generator, seconds: float) -> np.ndarray:
    """Bursts of harmonic tone separated by silence: something with onsets to align."""
    t = np.arange(int(seconds * RATE)) / RATE
    f0 = rng.uniform(100, 200)
    tone = sum(np.sin(2 * np.pi * k * f0 * t) / k for k in range(1, 6))
    gate = (np.sin(2 * np.pi * 3 * t) > 0).astype(float)
    return (0.2 * tone * gate).astype(np.float32)


@pytest.fixture
def clean_dir(tmp_path) -> Path:
    rng = np.random.default_rng(0)
    utts = []
    for spk in ("a", "b"):
        for i in range(3):
            wav = tmp_path / "wav" / f"{spk}-{i}.wav"
            wav.parent.mkdir(exist_ok=True)
            soundfile.write(wav, _speechlike(rng, 1.0 + 0.1 * i), RATE, "PCM_16")
            utts.append(Utterance(f"{spk}-{i}", spk, f"word{i} other", str(wav)))
    write_data_dir(tmp_path / "train", utts)
    return tmp_path / "train"


def test_copies_have_kaldi_ids_utt2uniq_and_the_right_lengths(clean_dir, tmp_path):
    out = tmp_path / "train_aug"
    summary = augment_data_dir(clean_dir, out, AugmentOptions(reverb_fraction=0.5,
                                                              noise_fraction=1.0))
    assert summary is not None and summary.copies == {"sp0.9": 6, "sp1.1": 6, "rev": 3,
                                                      "noise": 6}
    utts = validate_data_dir(out)
    assert len(utts) == 6 + 21
    utt2spk, uniq = read_table(out / "utt2spk"), read_table(out / "utt2uniq")
    text, wav = read_table(out / "text"), read_table(out / "wav.scp")
    assert utt2spk["sp0.9-a-1"] == "sp0.9-a" and utt2spk["a-1"] == "a"
    assert set(uniq) == set(utts) and uniq["sp1.1-b-2"] == "b-2" and uniq["b-2"] == "b-2"
    for utt in utts:
        assert text[utt] == text[uniq[utt]]
        n = soundfile.info(wav[utt]).frames
        n_clean = soundfile.info(wav[uniq[utt]]).frames
        if utt.startswith("sp"):
            factor = float(utt[2:utt.index("-")])
            assert abs(n - n_clean / factor) <= 2
        else:  # reverberated and noisy copies keep the clean timing, sample for sample
            assert n == n_clean
    assert sorted(p.name for p in (tmp_path / "wav" / "train_aug").iterdir()) == [
        "noise", "rev", "sp0.9", "sp1.1"]
    assert abs(summary.hours - summary.clean_hours * (1 + 1 / 0.9 + 1 / 1.1 + 0.5 + 1)) < 1e-3


def test_rerun_is_skipped_and_other_options_redo(clean_dir, tmp_path):
    out = tmp_path / "aug"
    options = AugmentOptions(speeds=(0.9,), reverb_fraction=0.0, noise_fraction=0.0)
    assert not isinstance(augment_data_dir(clean_dir, out, options), Skipped)
    assert augment_data_dir(clean_dir, out, options) == Skipped(out, "augment")
    again = augment_data_dir(clean_dir, out, AugmentOptions(speeds=(1.1,), reverb_fraction=0.0,
                                                           noise_fraction=0.0))
    assert again is not None and again.copies == {"sp1.1": 6}
    assert not (tmp_path / "wav" / "aug" / "sp0.9").exists()


def test_synthetic_rir_decays_and_reverb_keeps_timing_and_power():
    rng = np.random.default_rng(1)
    rir = synthetic_rir(rng, RATE, 0.5)
    assert np.argmax(np.abs(rir)) == 0 and rir.size == RATE // 2
    early, late = np.sum(rir[1:800] ** 2), np.sum(rir[-800:] ** 2)
    assert late < 1e-3 * early  # about 60 dB down at the end
    clean = _speechlike(rng, 1.0)
    wet = reverberate(clean, rng, RATE, (0.3, 0.3))
    assert wet.shape == clean.shape
    np.testing.assert_allclose(np.mean(wet**2), np.mean(clean**2), rtol=1e-3)
    lags = range(-200, 201)
    xcorr = [np.dot(np.roll(wet, -lag), clean) for lag in lags]
    assert list(lags)[int(np.argmax(xcorr))] == 0  # the direct path is where the speech was
    assert not np.allclose(wet, clean, atol=1e-3)


def test_noise_is_added_at_the_requested_snr():
    rng = np.random.default_rng(2)
    speech, noise = _speechlike(rng, 1.0), rng.standard_normal(RATE)
    noisy = add_noise(speech, noise, 10.0)
    snr = 10 * np.log10(np.mean(speech.astype(float) ** 2) / np.mean((noisy - speech) ** 2))
    assert abs(snr - 10.0) < 1e-6
    with pytest.raises(AsrdistError, match="silent"):
        add_noise(np.zeros(10), noise[:10], 10.0)


def test_bad_options_are_refused():
    with pytest.raises(AsrdistError, match="--speeds"):
        AugmentOptions(speeds=(1.0,))
    with pytest.raises(AsrdistError, match="--noise-fraction 1.5"):
        AugmentOptions(noise_fraction=1.5)
    with pytest.raises(AsrdistError, match="--rt60"):
        AugmentOptions(rt60=(0.5, 0.2))
