"""The mini corpus: grammar sentences spoken by espeak-ng and flite voices, as a Kaldi recipe's
data/.

Train and test use disjoint voices (speakers) of every synthesizer (asrdist.corpus.voices) and
disjoint sentences. Every random choice of an
utterance (rate, pitch, padding, noise) comes from a generator seeded by (seed, split, index), so
a run is reproducible and a killed run resumes by keeping the wav files it already wrote.
espeak itself carries a little state from one utterance to the next (a few samples of length,
small waveform details), so a fresh uninterrupted run is reproducible bit for bit, and a resumed
one differs from it only in those details.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import logging
import os
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import soundfile
import torch
from lhotse import AudioSource, Recording, RecordingSet, SupervisionSegment, SupervisionSet

from asrdist.corpus.lexicon import OOV_WORD, build_lexicon, write_dict_dir
from asrdist.corpus.sentences import SentenceGrammar, iter_unique_sentences
from asrdist.corpus.voices import SYNTHESIZERS, Voice, check_synthesizers, speak, voice_of, voices
from asrdist.errors import AsrdistError
from asrdist.fsutil import atomic_path, atomic_write, staged_dir
from asrdist.kaldi.data_dir import Utterance, c_sorted, write_data_dir
from asrdist.progress import progress
from asrdist.stage import Skipped, check_done

log = logging.getLogger(__name__)

STAGE = "prepare_mini"
# The lexicon holds every pronunciation the voices' languages give a word.
LEXICON_LANGUAGES = ("en-us", "en")
DEFAULT_TEST_HOURS = 20 / 60  # about 2900 words: 1 point of WER is 29 errors
RATE_WPM = (140, 200)
PITCH = (35, 65)
PAD_SECONDS = (0.1, 0.5)
SNR_DB = (15.0, 30.0)
PEAK = (0.3, 0.9)
_STREAM = {"test": 0, "train": 1}


@dataclass(frozen=True)
class CorpusOptions:
    """What the corpus depends on; a rerun with other options into the same dir remakes it."""

    hours: float = 3.0
    test_hours: float | None = None
    test_utts: int | None = None
    seed: int = 0
    sample_rate: int = 16000
    synthesizers: tuple[str, ...] = tuple(SYNTHESIZERS)

    def __post_init__(self) -> None:
        check_synthesizers(self.synthesizers)
        if self.hours <= 0:
            raise AsrdistError(f"--hours must be positive, got {self.hours}")
        if self.test_hours is not None and self.test_utts is not None:
            raise AsrdistError("give --test-hours or --test-utts, not both")
        if (self.test_hours is not None and self.test_hours <= 0) or (
            self.test_utts is not None and self.test_utts <= 0
        ):
            raise AsrdistError("--test-hours / --test-utts must be positive")


@dataclass(frozen=True)
class SplitSummary:
    utterances: int
    hours: float
    speakers: int


@dataclass(frozen=True)
class CorpusSummary:
    train: SplitSummary
    test: SplitSummary
    lexicon_words: int
    train_text_words: int
    test_oov_words: int  # distinct test words never seen in the train text
    phones: int

    def lines(self) -> list[str]:
        """Human-readable report lines."""
        rows = [
            f"{name}: {s.utterances} utterances, {s.hours:.3f} h, {s.speakers} voices"
            for name, s in (("train", self.train), ("test", self.test))
        ]
        return rows + [
            f"vocabulary: {self.lexicon_words} words in the lexicon, "
            f"{self.train_text_words} in the train text, "
            f"{self.test_oov_words} test words unseen in train",
            f"phones: {self.phones} (+ SIL, SPN)",
        ]


@dataclass
class _Record:
    utt: Utterance
    voice: Voice
    duration: float


def render_utterance(
    text: str, voice: Voice, rng: np.random.Generator, sample_rate: int
) -> np.ndarray:
    """Speak ``text`` with a random rate and pitch, pad with silence, add coloured noise.

    Returns int16 samples. The noise level is set from the speech power at an SNR drawn
    from SNR_DB; its spectrum tilt (white to pink-ish) is random too.
    """
    rate = int(rng.integers(RATE_WPM[0], RATE_WPM[1] + 1))
    pitch = int(rng.integers(PITCH[0], PITCH[1] + 1))
    speech = speak(text, voice, rate, pitch, sample_rate)
    if speech.size == 0 or not np.any(speech):
        raise AsrdistError(f"{voice.synth} produced silence for {voice.name}: {text!r}")
    left, right = (int(rng.uniform(*PAD_SECONDS) * sample_rate) for _ in range(2))
    audio = np.concatenate([np.zeros(left), speech.astype(np.float64), np.zeros(right)])
    speech_power = float(np.mean(speech.astype(np.float64) ** 2))
    noise = coloured_noise(audio.size, rng.uniform(0.0, 1.0), rng)
    snr_db = rng.uniform(*SNR_DB)
    audio += noise * np.sqrt(speech_power / 10 ** (snr_db / 10))
    audio *= rng.uniform(*PEAK) / np.max(np.abs(audio))
    return np.round(audio * 32767).astype(np.int16)


def coloured_noise(n: int, tilt: float, rng: np.random.Generator) -> np.ndarray:
    """Unit-power noise with power spectrum ~ 1/f**tilt (0 = white, 1 = pink)."""
    size = 1 << max(n - 1, 1).bit_length()  # FFTs of a power of two: 5-10x faster than odd n
    spectrum = np.fft.rfft(rng.standard_normal(size))
    freqs = np.arange(spectrum.size, dtype=np.float64)
    freqs[0] = 1.0
    noise = np.fft.irfft(spectrum / freqs ** (tilt / 2), size)[:n]
    return noise / np.sqrt(np.mean(noise**2))


def _synthesize_split(
    out: Path,
    split: str,
    sentences: Iterator[str],
    enough: Callable[[int, float], bool],
    options: CorpusOptions,
    progress_total: float,
    progress_in_seconds: bool,
) -> list[_Record]:
    """Make a split's wavs until ``enough(count, seconds)``; reuses wavs already written.

    The progress bar counts seconds of audio or utterances (``progress_in_seconds``).
    """
    split_voices = voices(split, options.synthesizers)
    records: list[_Record] = []
    seconds = 0.0
    unit = "s" if progress_in_seconds else "utt"
    with progress(round(progress_total), f"{split} audio", unit) as bar:
        for index in itertools.count():
            if enough(len(records), seconds):
                break
            text = next(sentences)
            voice = voice_of(index, split_voices)
            utt_id = f"{voice.speaker}-{index:06d}"
            wav = out / "wav" / split / voice.speaker / f"{utt_id}.wav"
            if wav.is_file():
                duration = soundfile.info(str(wav)).duration
            else:
                rng = np.random.default_rng([options.seed, _STREAM[split], index])
                audio = render_utterance(text, voice, rng, options.sample_rate)
                with atomic_path(wav) as tmp:
                    soundfile.write(tmp, audio, options.sample_rate, "PCM_16", format="WAV")
                duration = audio.size / options.sample_rate
            records.append(_Record(Utterance(utt_id, voice.speaker, text, str(wav)),
                                   voice, duration))
            seconds += duration
            bar.update(round(seconds) - bar.n if progress_in_seconds else 1)
    return records


def _hours_stop(hours: float) -> Callable[[int, float], bool]:
    return lambda _count, seconds: seconds >= hours * 3600


def _write_manifests(directory: Path, splits: dict[str, list[_Record]], rate: int) -> None:
    """lhotse RecordingSet / SupervisionSet manifests, one pair per split."""
    with staged_dir(directory) as tmp:
        for split, records in splits.items():
            recordings, supervisions = [], []
            for r in records:
                num_samples = round(r.duration * rate)
                recordings.append(Recording(
                    id=r.utt.utt_id,
                    sources=[AudioSource(type="file", channels=[0], source=r.utt.wav_path)],
                    sampling_rate=rate, num_samples=num_samples, duration=num_samples / rate,
                ))
                supervisions.append(SupervisionSegment(
                    id=r.utt.utt_id, recording_id=r.utt.utt_id, start=0.0,
                    duration=num_samples / rate, channel=0, text=r.utt.text,
                    speaker=r.utt.speaker, language="English",
                    custom={"synthesizer": r.voice.synth, "voice": r.voice.name},
                ))
            RecordingSet.from_recordings(recordings).to_file(tmp / f"{split}_recordings.jsonl.gz")
            SupervisionSet.from_segments(supervisions).to_file(
                tmp / f"{split}_supervisions.jsonl.gz")


def _summarize(splits: dict[str, list[_Record]], lexicon: dict, phones: int) -> CorpusSummary:
    def split_summary(records: list[_Record]) -> SplitSummary:
        return SplitSummary(len(records), sum(r.duration for r in records) / 3600,
                            len({r.utt.speaker for r in records}))

    def words(records: list[_Record]) -> set[str]:
        return {w for r in records for w in r.utt.text.split()}

    train_words = words(splits["train"])
    return CorpusSummary(
        train=split_summary(splits["train"]),
        test=split_summary(splits["test"]),
        lexicon_words=len(lexicon),
        train_text_words=len(train_words),
        test_oov_words=len(words(splits["test"]) - train_words),
        phones=phones,
    )


def _keep_valid_wavs(out: Path, options: CorpusOptions) -> None:
    """Keep the wavs of an earlier (maybe killed) run only when it had the same options but
    maybe --hours: an utterance's sentence and audio depend on all the others (the test texts
    leave the train stream), so the wavs of a run that differs in them are removed."""
    path = out / f".{STAGE}.options.json"
    wanted = json.loads(json.dumps(dataclasses.asdict(options)))  # tuples as JSON lists
    earlier = json.loads(path.read_text()) if path.is_file() else wanted
    if {**earlier, "hours": None} != {**wanted, "hours": None} and (out / "wav").exists():
        log.info("%s: the wavs were made with other options; removing them", out / "wav")
        shutil.rmtree(out / "wav")
    with atomic_write(path) as f:
        json.dump(wanted, f, sort_keys=True)


def read_summary(out: str | os.PathLike) -> CorpusSummary:
    """The summary a finished run stored in ``out/local/corpus_summary.json``."""
    raw = json.loads((Path(out) / "local" / "corpus_summary.json").read_text())
    return CorpusSummary(
        train=SplitSummary(**raw.pop("train")), test=SplitSummary(**raw.pop("test")), **raw
    )


def prepare_mini(out: str | os.PathLike, options: CorpusOptions) -> CorpusSummary | Skipped:
    """Make the whole mini corpus in ``out`` (see contracts.md, stage 0).

    Returns Skipped when ``out`` already holds a finished run with the same options (the one
    rule of asrdist.stage: the options are the fingerprint, the synthesizers the only input);
    with other options the corpus, the lexicon and the lang dir are made again.
    """
    out = Path(out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    check = check_done(out, STAGE, dataclasses.asdict(options))
    if check.done:
        return check.skipped()
    _keep_valid_wavs(out, options)
    if options.test_utts is not None:
        test_enough = lambda count, _seconds: count >= options.test_utts  # noqa: E731
        test_total, test_in_seconds = float(options.test_utts), False
    else:
        test_hours = options.test_hours if options.test_hours is not None else DEFAULT_TEST_HOURS
        test_enough = _hours_stop(test_hours)
        test_total, test_in_seconds = test_hours * 3600, True

    splits: dict[str, list[_Record]] = {}
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # resampling one utterance: extra threads only contend (8x slower)
    try:
        splits["test"] = _synthesize_split(
            out, "test", iter_unique_sentences(options.seed, _STREAM["test"]), test_enough,
            options, test_total, test_in_seconds)
        test_texts = {r.utt.text for r in splits["test"]}
        splits["train"] = _synthesize_split(
            out, "train",
            iter_unique_sentences(options.seed, _STREAM["train"], exclude=test_texts),
            _hours_stop(options.hours), options, options.hours * 3600, True)
    finally:
        torch.set_num_threads(threads)

    for split, records in splits.items():
        write_data_dir(out / split, [r.utt for r in records])
        with atomic_write(out / split / "utt2synth") as f:  # asrdist-score text --subsets-by
            synth = {r.utt.utt_id: r.voice.synth for r in records}
            f.writelines(f"{u} {synth[u]}\n" for u in c_sorted(synth))
    _write_manifests(out / "manifests", splits, options.sample_rate)

    lexicon = build_lexicon(SentenceGrammar().vocabulary(), LEXICON_LANGUAGES)
    dict_dir = out / "local" / "dict"
    write_dict_dir(lexicon, dict_dir)
    from asrdist.kaldi.lang import prepare_lang  # imports kaldifst: only when needed

    prepare_lang(dict_dir, out / "lang", oov_word=OOV_WORD)

    phones = {p for prons in lexicon.values() for pron in prons for p in pron}
    summary = _summarize(splits, lexicon, len(phones))
    with atomic_write(out / "local" / "voices.txt") as f:
        for split in ("train", "test"):
            f.writelines(f"{v.speaker} {v.synth} {v.name} {split}\n"
                         for group in voices(split, options.synthesizers) for v in group)
    with atomic_write(out / "local" / "corpus_summary.json") as f:
        json.dump(dataclasses.asdict(summary), f, indent=1)
    check.mark_done()
    log.info("mini corpus ready in %s", out)
    return summary

