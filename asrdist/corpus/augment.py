"""Data augmentation of a Kaldi data dir, as Kaldi and lhotse recipes do it.

Three kinds of copies, each a new utterance with a prefixed id, written as real wav files:

- speed perturbation (Kaldi's perturb_data_dir_speed.sh, lhotse's ``Speed``: sox ``speed``,
  tempo and pitch together): ``sp0.9-<utt>`` of speaker ``sp0.9-<spk>``; the timing changes,
  so these copies are realigned with the clean model (asrdist-align-aug);
- reverberation with a synthetic room impulse response (lhotse's ``ReverbWithImpulseResponse``,
  which shifts the output to the direct path as Kaldi's wav-reverberate --shift-output):
  ``rev1-<utt>``;
- additive noise at an SNR drawn from a range, coloured noise or babble of other training
  utterances (Kaldi's augment_data_dir.py with MUSAN noise/babble): ``noise1-<utt>``.

Reverberated and noisy copies keep the clean utterance's timing sample for sample, so they
reuse its alignment, as Kaldi's rvb recipes copy the clean alignments (utt2uniq names the
clean utterance of every copy). The clean utterances are kept under their own ids.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import soundfile
import torch
from lhotse.augmentation import ReverbWithImpulseResponse, Speed

from asrdist.corpus.mini_corpus import coloured_noise
from asrdist.errors import AsrdistError
from asrdist.fsutil import atomic_path, atomic_write
from asrdist.kaldi.data_dir import (
    Utterance,
    c_sorted,
    read_table,
    validate_data_dir,
    write_data_dir,
)
from asrdist.stage import Skipped, check_done

log = logging.getLogger(__name__)

STAGE = "augment"
REVERB_PREFIX = "rev1-"
NOISE_PREFIX = "noise1-"
BABBLE_TALKERS = 3


def speed_prefix(factor: float) -> str:
    """Kaldi's prefix: ``sp0.9-``, ``sp1.1-``."""
    return f"sp{factor:g}-"


@dataclass(frozen=True)
class AugmentOptions:
    """Which copies to make; fractions are of the clean utterances."""

    speeds: tuple[float, ...] = (0.9, 1.1)
    reverb_fraction: float = 0.5
    noise_fraction: float = 0.5
    snr_db: tuple[float, float] = (5.0, 20.0)
    rt60: tuple[float, float] = (0.2, 0.7)  # seconds
    seed: int = 0

    def __post_init__(self) -> None:
        if any(not 0.5 <= f <= 2.0 or f == 1.0 for f in self.speeds):
            raise AsrdistError(f"--speeds {self.speeds}: factors in [0.5, 2] other than 1")
        for name, f in (("--reverb-fraction", self.reverb_fraction),
                        ("--noise-fraction", self.noise_fraction)):
            if not 0.0 <= f <= 1.0:
                raise AsrdistError(f"{name} {f}: give a fraction in [0, 1]")
        if not 0.0 < self.rt60[0] <= self.rt60[1] or self.snr_db[0] > self.snr_db[1]:
            raise AsrdistError(f"--rt60 {self.rt60} / --snr {self.snr_db}: give low <= high")


@dataclass(frozen=True)
class AugmentSummary:
    clean_utts: int
    clean_hours: float
    copies: dict[str, int]  # kind -> utterances
    hours: float  # all of the output, clean included
    seconds: float  # wall time


def synthetic_rir(rng: np.random.Generator, sample_rate: int, rt60: float) -> np.ndarray:
    """A room impulse response: a direct path, then exponentially decaying noise whose energy
    falls 60 dB in ``rt60`` seconds (the statistical room model), starting after a short
    pre-delay, at a direct-to-reverberant ratio drawn from -3..10 dB."""
    n = int(rt60 * sample_rate)
    t = np.arange(n) / sample_rate
    tail = rng.standard_normal(n) * np.exp(-3.0 * np.log(10.0) * t / rt60)
    tail[: int(rng.uniform(0.002, 0.02) * sample_rate)] = 0.0  # pre-delay of the reflections
    drr_db = rng.uniform(-3.0, 10.0)
    tail *= np.sqrt(10 ** (-drr_db / 10) / np.sum(tail**2))
    tail[0] = max(1.0, 1.01 * np.abs(tail[1:]).max())  # the direct path stays the largest tap
    return tail


def reverberate(audio: np.ndarray, rng: np.random.Generator, sample_rate: int,
                rt60: tuple[float, float]) -> np.ndarray:
    """``audio`` convolved with a fresh synthetic RIR, same length and power, direct path
    aligned with the input (lhotse's ReverbWithImpulseResponse)."""
    rir = synthetic_rir(rng, sample_rate, rng.uniform(*rt60))
    transform = ReverbWithImpulseResponse(rir_generator=lambda nsource=1: rir[None, :])
    return transform(audio[None, :].astype(np.float32), sample_rate)[0]


def add_noise(audio: np.ndarray, noise: np.ndarray, snr_db: float) -> np.ndarray:
    """``audio + noise`` scaled so the speech-to-noise power ratio is ``snr_db``."""
    speech_power = float(np.mean(audio.astype(np.float64) ** 2))
    noise_power = float(np.mean(noise.astype(np.float64) ** 2))
    if speech_power == 0.0 or noise_power == 0.0:
        raise AsrdistError("cannot set an SNR for silent speech or silent noise")
    return audio + noise * np.sqrt(speech_power / noise_power / 10 ** (snr_db / 10))


def _babble(others: list[np.ndarray], n: int) -> np.ndarray:
    """Several talkers at once, each looped to ``n`` samples."""
    out = np.zeros(n)
    for o in others:
        out += np.resize(o.astype(np.float64) / max(np.std(o), 1e-9), n)
    return out


def _write(path: Path, audio: np.ndarray, sample_rate: int) -> None:
    peak = np.abs(audio).max()
    if peak > 0.99:  # no clipping: the copy is scaled down instead
        audio = audio * (0.99 / peak)
    with atomic_path(path) as tmp:
        soundfile.write(tmp, audio, sample_rate, "PCM_16", format="WAV")


@dataclass
class _Source:
    """The clean data dir: its utterances (C-sorted) and tables."""

    path: Path
    utts: list[str]
    wav: dict[str, str]
    text: dict[str, str]
    utt2spk: dict[str, str]
    _others: dict[str, list[str]] = field(default_factory=dict)

    @classmethod
    def load(cls, path: Path) -> _Source:
        utts = validate_data_dir(path)
        return cls(path, utts, *(read_table(path / n) for n in ("wav.scp", "text", "utt2spk")))

    def others(self, speaker: str) -> list[str]:
        """The utterances of every other speaker, in order (made once per speaker: babble
        draws from them for each noisy copy)."""
        if speaker not in self._others:
            self._others[speaker] = [u for u in self.utts if self.utt2spk[u] != speaker]
        return self._others[speaker]

    def read(self, utt: str) -> tuple[np.ndarray, int]:
        wav = self.wav[utt]
        if wav.rstrip().endswith("|"):
            raise AsrdistError(f"{self.path / 'wav.scp'}: {utt} is a pipe; give wav files")
        try:
            audio, rate = soundfile.read(wav, dtype="float32")
        except (RuntimeError, soundfile.LibsndfileError) as e:
            raise AsrdistError(f"{self.path / 'wav.scp'}: {utt}: cannot read {wav} ({e})") from e
        if audio.ndim != 1:
            raise AsrdistError(f"{wav}: {utt} is not mono")
        return audio, rate


def _chosen(utts: list[str], fraction: float, rng: np.random.Generator) -> list[str]:
    count = round(fraction * len(utts))
    return sorted((utts[i] for i in rng.permutation(len(utts))[:count]), key=str.encode)


def augment_data_dir(src: str | os.PathLike, out: str | os.PathLike,
                     options: AugmentOptions, wav_dir: str | os.PathLike | None = None
                     ) -> AugmentSummary | Skipped:
    """Write ``out``: the clean utterances of ``src`` and their copies (wav.scp, text, utt2spk,
    spk2utt, utt2uniq), wavs under ``wav_dir`` (default ``out/../wav/<out name>``). Skipped when
    ``out`` is done with the same options and ``src`` (asrdist.stage)."""
    src, out = Path(src), Path(out)
    wav_dir = Path(wav_dir) if wav_dir else out.parent / "wav" / out.name
    check = check_done(out, STAGE, dataclasses.asdict(options), [src])
    if check.done:
        return check.skipped()
    data = _Source.load(src)
    start = time.time()
    if wav_dir.exists():
        shutil.rmtree(wav_dir)  # copies of an earlier run with other options
    utts = [Utterance(u, data.utt2spk[u], data.text[u], data.wav[u]) for u in data.utts]
    uniq = {u: u for u in data.utts}
    copies: dict[str, int] = {}
    clean_seconds = total_seconds = 0.0

    def add(kind: str, prefix: str, utt: str, audio: np.ndarray, rate: int) -> None:
        nonlocal total_seconds
        new_id = prefix + utt
        path = wav_dir / kind / f"{new_id}.wav"
        _write(path, audio, rate)
        utts.append(Utterance(new_id, prefix + data.utt2spk[utt], data.text[utt], str(path)))
        uniq[new_id] = utt
        copies[kind] = copies.get(kind, 0) + 1
        total_seconds += audio.size / rate

    rng = np.random.default_rng([options.seed, 0])
    reverb_utts = set(_chosen(data.utts, options.reverb_fraction, rng))
    noise_utts = set(_chosen(data.utts, options.noise_fraction, rng))
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # one utterance at a time: extra threads only contend
    try:
        for index, utt in enumerate(data.utts):
            audio, rate = data.read(utt)
            clean_seconds += audio.size / rate
            total_seconds += audio.size / rate
            for factor in options.speeds:
                add(f"sp{factor:g}", speed_prefix(factor), utt,
                    Speed(factor)(audio[None, :], rate)[0], rate)
            utt_rng = np.random.default_rng([options.seed, 1, index])
            if utt in reverb_utts:
                add("rev", REVERB_PREFIX, utt, reverberate(audio, utt_rng, rate, options.rt60),
                    rate)
            if utt in noise_utts:
                add("noise", NOISE_PREFIX, utt,
                    _noisy(audio, utt, data, utt_rng, options.snr_db), rate)
    finally:
        torch.set_num_threads(threads)
    write_data_dir(out, utts)
    with atomic_write(out / "utt2uniq") as f:
        f.writelines(f"{u} {uniq[u]}\n" for u in c_sorted(uniq))
    summary = AugmentSummary(len(data.utts), clean_seconds / 3600, copies, total_seconds / 3600,
                             time.time() - start)
    check.mark_done()
    return summary


def _noisy(audio: np.ndarray, utt: str, data: _Source, rng: np.random.Generator,
           snr_db: tuple[float, float]) -> np.ndarray:
    """Coloured noise or babble of other utterances, at an SNR drawn from ``snr_db``."""
    others = data.others(data.utt2spk[utt])
    if rng.random() < 0.5 or not others:
        noise = coloured_noise(audio.size, rng.uniform(0.0, 2.0), rng)
    else:
        talkers = rng.choice(len(others), size=min(BABBLE_TALKERS, len(others)), replace=False)
        noise = _babble([data.read(others[i])[0] for i in talkers], audio.size)
    return add_noise(audio, noise, rng.uniform(*snr_db))
