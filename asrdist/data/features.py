"""Kaldi-compatible fbank / MFCC features and per-speaker CMVN stats for a Kaldi data dir.

Features come from lhotse's Kaldi-compatible extractors with Kaldi's framing (snip_edges=True,
so a wav of n samples gives 1 + (n - 400) // 160 frames at 16 kHz, the count a Kaldi GMM
alignment has) and no dither. Samples are fed on the int16 scale, as Kaldi's compute-*-feats
reads wav files, so the log energies match Kaldi's. Output is what a Kaldi user expects:
feats.scp/ark, cmvn.scp (compute-cmvn-stats --spk2utt layout), utt2num_frames, frame_shift;
and feats_config.json, what made the vectors, which a model trained on them keeps
(asrdist.kaldi.feats_config).

Segments are cut as Kaldi's extract-segments cuts them (asrdist.kaldi.segments): one it skips
(shorter than 0.1 s, ending more than 0.5 s past its recording, ...) is skipped here too and
named in one summary line, and the tables of DEST leave it out, as utils/fix_data_dir.sh after
make_fbank.sh would; only a data dir with nothing left is an error.

Audio comes from wav.scp in any of Kaldi's forms (asrdist.kaldi.wav_scp): a file, a pipe the
shell runs, or a sph2pipe / asrdist-sph2wav pipe read in-process. A job reads its utterances
file by file: a two-channel SPHERE file is decoded once, and every side and speed copy is cut
from it, one copy alive at a time.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import os
import shutil
import time
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import kaldiio
import numpy as np
import torch
from lhotse.features.kaldi.extractors import Fbank, FbankConfig, Mfcc, MfccConfig

from asrdist.errors import AsrdistError
from asrdist.fsutil import atomic_write
from asrdist.jobs import LOCAL, Runner, split_groups
from asrdist.kaldi.ark_writer import ark_writer
from asrdist.kaldi.cmvn import cmvn_stats
from asrdist.kaldi.data_dir import c_sorted, read_table, read_utf8
from asrdist.kaldi.feats_config import FEATS_CONFIG, write_feats_config
from asrdist.kaldi.segments import segment_samples
from asrdist.kaldi.sphere import (
    FALLBACK_WARNING,
    change_speed,
    native_decoder,
    read_sphere,
    sphere_channel,
)
from asrdist.kaldi.wav_scp import (
    SPEED_WARNING,
    Pipe,
    SphereChannel,
    WavFile,
    Which,
    audio_source,
    read_audio,
)
from asrdist.progress import progress
from asrdist.stage import Skipped, check_done

log = logging.getLogger(__name__)

STAGE = "features"
KINDS = ("fbank", "mfcc")
FRAME_SHIFT = 0.01
# Kaldi files copied from SRC unchanged when present (the first four are required).
COPIED_FILES = ("wav.scp", "text", "utt2spk", "spk2utt", "segments", "reco2file_and_channel",
                "spk2gender", "utt2dur", "utt2uniq")
# the tables of those keyed by utterance, by speaker, by recording (given segments)
UTT_FILES = ("text", "utt2spk", "segments", "utt2dur", "utt2uniq")
SPK_FILES = ("spk2gender",)
RECO_FILES = ("wav.scp", "reco2file_and_channel")
NO_FRAME = "too short for one frame"


@dataclass(frozen=True)
class FeatureOptions:
    """Feature type and size; num_mel_bins defaults to 40 (fbank) or 23 (mfcc, Kaldi's).

    ``high_freq`` is the mel filterbank's upper edge in Hz, <= 0 meaning that far below the
    Nyquist frequency (Kaldi's --high-freq); None keeps lhotse's -400, so features made before
    the option existed keep their fingerprint. Kaldi's own default is 0 (the Nyquist frequency):
    at 8 kHz lhotse's drops the 3600-4000 Hz band."""

    kind: str = "fbank"
    num_mel_bins: int | None = None
    num_ceps: int = 13
    sample_rate: int = 16000
    high_freq: float | None = None

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise AsrdistError(f"--kind must be one of {', '.join(KINDS)}, got {self.kind!r}")
        if self.num_mel_bins is None:
            object.__setattr__(self, "num_mel_bins", 40 if self.kind == "fbank" else 23)
        nyquist = self.sample_rate / 2
        if self.high_freq is not None and not -nyquist < self.high_freq <= nyquist:
            raise AsrdistError(f"--high-freq {self.high_freq:g}: must be in "
                               f"({-nyquist:g}, {nyquist:g}] Hz at {self.sample_rate} Hz")

    def fingerprint(self) -> dict:
        """The options a done marker records; an unset high_freq is left out (see above)."""
        return {k: v for k, v in dataclasses.asdict(self).items()
                if not (k == "high_freq" and v is None)}

    @property
    def dim(self) -> int:
        return self.num_mel_bins if self.kind == "fbank" else self.num_ceps


def make_extractor(options: FeatureOptions) -> Fbank | Mfcc:
    """The lhotse extractor with Kaldi's framing (snip_edges) and no dither."""
    common = dict(sampling_rate=options.sample_rate, frame_shift=FRAME_SHIFT, dither=0.0,
                  snip_edges=True, num_filters=options.num_mel_bins)
    if options.high_freq is not None:
        common["high_freq"] = options.high_freq
    with warnings.catch_warnings():  # lhotse warns that snip_edges breaks its duration maths
        warnings.simplefilter("ignore", UserWarning)
        if options.kind == "fbank":
            return Fbank(FbankConfig(**common))
        return Mfcc(MfccConfig(**common, num_ceps=options.num_ceps))


def feats_config(options: FeatureOptions) -> dict[str, Any]:
    """What makes the vectors (feats_config.json, asrdist.kaldi.feats_config): the kind and
    the extractor's whole configuration (sample rate, bins, cepstra, framing, band)."""
    return {"kind": options.kind, **make_extractor(options).config.to_dict()}


def compute_features(samples: np.ndarray, extractor: Fbank | Mfcc, sample_rate: int) -> np.ndarray:
    """Features (frames x dim, float32) of int16-scale samples; callers on the fly use this too."""
    with torch.no_grad():
        feats = extractor.extract(np.asarray(samples, dtype=np.float32), sample_rate)
    return np.ascontiguousarray(feats, dtype=np.float32)


def num_frames(num_samples: int, sample_rate: int = 16000) -> int:
    """Kaldi's frame count with snip_edges=true (25 ms window, 10 ms shift)."""
    window, shift = int(0.025 * sample_rate), int(FRAME_SHIFT * sample_rate)
    return 0 if num_samples < window else 1 + (num_samples - window) // shift


@dataclass(frozen=True)
class _Item:
    utt: str
    wav: str  # wav.scp value
    source: WavFile | SphereChannel | Pipe  # how it is read (wav_scp.audio_source)
    start: float = 0.0  # seconds, from segments
    end: float = -1.0  # -1: to the end
    segment: bool = False  # from a segments file (else the whole recording)

    @property
    def file(self) -> tuple[str, str]:
        """What is read once for every utterance that shares it: the SPHERE file behind
        both sides and every speed, else the recording's own wav.scp value."""
        if isinstance(self.source, SphereChannel):
            return "sphere", self.source.path
        return "wav.scp", self.wav

    @property
    def order(self) -> tuple:
        """Where it comes in its file's work: side by side, speed by speed, so that one
        channel at one speed is made once."""
        if isinstance(self.source, SphereChannel):
            return self.source.channel, self.source.speed, self.utt.encode()
        return 0, 1.0, self.utt.encode()


class _Audio:
    """The audio a job is cutting utterances from: one file, decoded once, and the one side
    at one speed of it in use (so at most one decoded file and one copy are alive)."""

    def __init__(self) -> None:
        self._file: tuple[str, str] | None = None
        self._decoded: tuple[np.ndarray, int] | None = None
        self._copy_of: tuple[int, float] | None = None
        self._copy: tuple[np.ndarray, int] | None = None

    def samples(self, item: _Item) -> tuple[np.ndarray, int]:
        """(int16-scale samples, rate) of ``item``'s recording (before segments cut it)."""
        try:
            return self._samples(item)
        except AsrdistError as e:
            raise AsrdistError(f"utterance {item.utt}: {e.message}") from e

    def _samples(self, item: _Item) -> tuple[np.ndarray, int]:
        source = item.source
        if item.file != self._file:
            self._file = self._decoded = self._copy_of = self._copy = None
            if isinstance(source, SphereChannel):
                self._decoded = read_sphere(source.path)
            else:
                self._copy = read_audio(source, functools.partial(_unchecked, item.utt))
            self._file = item.file
        if isinstance(source, SphereChannel) and self._copy_of != (source.channel, source.speed):
            self._copy = None  # the last copy goes before the next is made
            samples, rate = self._decoded
            mono = sphere_channel(source.path, samples, source.channel)
            self._copy = (change_speed(mono, source.speed) if source.speed != 1.0 else mono, rate)
            self._copy_of = (source.channel, source.speed)
        return self._copy


def _unchecked(utt: str, why: str) -> None:
    """One line for audio whose length nothing declares: a stream cut short would not show."""
    log.warning("utterance %s: %s", utt, why)


def _load_item(item: _Item, audio: _Audio, sample_rate: int) -> np.ndarray | str:
    """The utterance's samples, or why extract-segments skips its segment."""
    samples, rate = audio.samples(item)
    if rate != sample_rate:
        raise AsrdistError(
            f"utterance {item.utt}: {item.wav} has {rate} Hz, expected {sample_rate} Hz"
        )
    if item.segment:
        cut = segment_samples(item.start, item.end, samples.size, rate)
        if isinstance(cut, str):
            return cut
        samples = samples[cut[0]:cut[1]]
    return samples


def _extract_job(
    items: list[_Item], ark: str, scp: str, options: FeatureOptions
) -> Iterator[tuple[str, int, np.ndarray | str]]:
    """Write one job's ark and its scp (sorted); yields (utt, frames, CMVN stats) per
    utterance, in the order of ``items`` (file by file), or (utt, 0, why) for one skipped.

    One job is one core, as in Kaldi: torch's extra threads would contend with the others."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        extractor = make_extractor(options)
        audio = _Audio()
        with ark_writer(ark, scp) as writer:
            for item in items:
                samples = _load_item(item, audio, options.sample_rate)
                if not isinstance(samples, str) and num_frames(samples.size,
                                                               options.sample_rate) == 0:
                    # compute-fbank-feats writes no frames; fix_data_dir.sh drops it
                    samples = NO_FRAME
                if isinstance(samples, str):
                    yield item.utt, 0, samples
                    continue
                feats = compute_features(samples, extractor, options.sample_rate)
                writer(item.utt, feats)
                yield item.utt, feats.shape[0], cmvn_stats(feats)
        lines = Path(scp).read_text().splitlines(keepends=True)
        with atomic_write(scp) as f:
            f.writelines(sorted(lines, key=_scp_key))
    finally:
        torch.set_num_threads(threads)


def _scp_key(line: str) -> bytes:
    return line.split(" ", 1)[0].encode()


def _items(src: Path) -> list[_Item]:
    """The utterances of ``src``, sorted as Kaldi sorts them; each recording's wav.scp value
    checked (a pipe's programs) before any audio is read."""
    wav = read_table(src / "wav.scp")
    which = functools.cache(shutil.which)  # this listing's: a few programs, thousands of lines
    if not wav:
        raise AsrdistError(f"{src / 'wav.scp'} is empty: no utterances in {src}")
    segments_path = src / "segments"
    if not segments_path.is_file():
        return [_Item(utt, wav[utt], _source(wav[utt], utt, which)) for utt in c_sorted(wav)]
    items, sources = [], {}
    for utt, rest in read_table(segments_path).items():
        fields = rest.split()
        if len(fields) != 3 or fields[0] not in wav:
            raise AsrdistError(f"{segments_path}: bad line for {utt} (recording not in wav.scp?)")
        try:
            start, end = float(fields[1]), float(fields[2])
        except ValueError:
            raise AsrdistError(f"{segments_path}: bad times for {utt}: {rest!r}") from None
        value = wav[fields[0]]
        if value not in sources:
            sources[value] = _source(value, utt, which)
        items.append(_Item(utt, value, sources[value], start, end, segment=True))
    return sorted(items, key=lambda i: i.utt.encode())


def _source(value: str, utt: str, which: Which) -> WavFile | SphereChannel | Pipe:
    """How ``value`` is read; a missing program or audio file stops here, before the work."""
    try:
        source = audio_source(value, which)
    except AsrdistError as e:
        raise AsrdistError(f"utterance {utt}: {e.message}") from e
    if not isinstance(source, Pipe) and not os.path.isfile(source.path):
        raise AsrdistError(f"utterance {utt}: cannot read audio {value.strip()!r}: "
                           f"no such file {source.path}")
    return source


def _by_file(items: list[_Item]) -> list[list[_Item]]:
    """``items`` grouped by the file they are read from (in the order of each file's first
    utterance), each group in its work order (:attr:`_Item.order`)."""
    groups: dict[tuple[str, str], list[_Item]] = {}
    for item in items:
        groups.setdefault(item.file, []).append(item)
    return [sorted(group, key=lambda i: i.order) for group in groups.values()]


def _warn_in_process(items: list[_Item]) -> None:
    """One line each when SPHERE audio is decoded by pure Python, or sped up not by sox."""
    spheres = [i.source for i in items if isinstance(i.source, SphereChannel)]
    if spheres and not native_decoder():
        log.warning("%s", FALLBACK_WARNING)
    if any(s.speed != 1.0 for s in spheres):
        log.warning("%s", SPEED_WARNING)


def make_features(
    src: str | os.PathLike, dest: str | os.PathLike, options: FeatureOptions, nj: int = 1,
    runner: Runner = LOCAL,
) -> Path | Skipped:
    """Extract features for the Kaldi data dir ``src`` into ``dest`` (contracts.md, stage 1)
    in ``nj`` jobs run by ``runner``. A job gets whole files (a Switchboard conversation's
    two sides and speed copies) and reads each once; the scps are sorted as Kaldi's are.

    Returns ``dest``, or Skipped when it is done with the same options and SRC tables.
    """
    src, dest = Path(src).resolve(), Path(dest).resolve()
    if src == dest:
        raise AsrdistError(f"SRC and DEST are the same directory ({src})")
    if nj < 1:
        raise AsrdistError(f"--nj must be at least 1, got {nj}")
    for name in COPIED_FILES[:4]:
        if not (src / name).is_file():
            raise AsrdistError(f"{src} is not a Kaldi data dir: missing {name}")
    # --nj only splits the work: left out of the fingerprint. The inputs are the tables read.
    check = check_done(dest, STAGE, {**options.fingerprint(), "src": str(src)},
                       [src / name for name in COPIED_FILES if (src / name).is_file()])
    if check.done:
        return check.skipped()
    (dest / f".{STAGE}.options.json").unlink(missing_ok=True)  # written by older versions
    for stale in ("feats.scp", "cmvn.scp", FEATS_CONFIG):  # nothing old beside new arks
        (dest / stale).unlink(missing_ok=True)

    items = _items(src)
    utt2spk = read_table(src / "utt2spk")
    missing = [i.utt for i in items if i.utt not in utt2spk]
    if missing:
        raise AsrdistError(f"{src / 'utt2spk'}: no speaker for utterance {missing[0]}")
    check_tables(src, {i.utt for i in items})
    _warn_in_process(items)
    # one file's utterances in one job, which decodes the file once for all of them
    parts = split_groups(_by_file(items), nj)
    name = f"{options.kind}_{src.name}"
    arks = [dest / "data" / f"raw_{name}.{j}.ark" for j in range(1, len(parts) + 1)]
    scps = [ark.with_suffix(".scp") for ark in arks]
    arks[0].parent.mkdir(parents=True, exist_ok=True)
    start = time.time()
    with progress(len(items), options.kind, "utt") as bar:
        jobs = runner.map(options.kind, _extract_job, [
            (part, str(ark), str(scp), options)
            for part, ark, scp in zip(parts, arks, scps, strict=True)], bar)
    results = sorted((r for job in jobs for r in job), key=lambda r: r[0].encode())
    skipped = {utt: why for utt, _, why in results if isinstance(why, str)}
    results = [r for r in results if not isinstance(r[2], str)]
    log.info("%s: %d utterances in %.1f s", name, len(results), time.time() - start)
    if skipped:
        log.warning("%s", skipped_summary(src, skipped, len(items)))
    if not results:
        raise AsrdistError(f"{src}: no utterance left: every one of the {len(items)} was "
                           "skipped (see the line above)")

    try:
        _write_outputs(src, dest, name, scps, results, utt2spk, set(skipped))
        write_feats_config(dest, feats_config(options))
    except BaseException:  # no feats.scp without its done marker: nothing looks complete
        for index in ("feats.scp", "cmvn.scp"):
            (dest / index).unlink(missing_ok=True)
        raise
    check.mark_done()
    return dest


def check_tables(src: Path, utts: set[str]) -> None:
    """Before the long work: every table copied is UTF-8, and ``text`` names only utterances
    that get features (wav.scp, or segments)."""
    for file in COPIED_FILES:
        if (src / file).is_file():
            read_utf8(src / file)
    if (src / "text").is_file():
        stray = [u for u in read_table(src / "text") if u not in utts]
        if stray:
            where = "segments" if (src / "segments").is_file() else "wav.scp"
            raise AsrdistError(f"{src / 'text'}: utterance {stray[0]} is not in {where} "
                               f"({len(stray)} such); fix the data dir (utils/fix_data_dir.sh)")


def skipped_summary(src: Path, skipped: dict[str, str], total: int) -> str:
    """One line: how many utterances were skipped of ``total``, why, and their ids."""
    by_reason: dict[str, list[str]] = {}
    for utt in c_sorted(skipped):
        by_reason.setdefault(skipped[utt], []).append(utt)
    reasons = "; ".join(f"{len(utts)} {why}: {' '.join(utts)}"
                        for why, utts in sorted(by_reason.items()))
    return (f"{src}: skipped {len(skipped)} of {total} utterances, as Kaldi's extract-segments "
            f"and fix_data_dir.sh do ({reasons})")


def filtered_tables(src: Path, skipped: set[str]) -> dict[str, str]:
    """The tables of COPIED_FILES in ``src`` without the ``skipped`` utterances, as
    utils/fix_data_dir.sh leaves them: their speakers and recordings gone when no utterance is
    left of them; lines kept as written, in their order."""
    tables = {f: read_utf8(src / f) for f in COPIED_FILES if (src / f).is_file()}
    if not skipped:
        return tables
    segmented = "segments" in tables

    def keep(file: str, ids: set[str] | None, exclude: set[str] = frozenset()) -> str:
        lines = tables[file].splitlines(keepends=True)
        return "".join(line for line in lines if line.split()
                       and (line.split()[0] in ids if ids is not None
                            else line.split()[0] not in exclude))

    out = {}
    for file in UTT_FILES + (() if segmented else ("wav.scp",)):
        if file in tables:
            out[file] = keep(file, None, skipped)
    speakers = {line.split()[1] for line in out["utt2spk"].splitlines() if len(line.split()) > 1}
    spk2utt = []
    for line in tables["spk2utt"].splitlines():
        spk, *utts = line.split()
        utts = [u for u in utts if u not in skipped]
        if utts:
            spk2utt.append(" ".join([spk, *utts]) + "\n")
    out["spk2utt"] = "".join(spk2utt)
    for file in SPK_FILES:
        if file in tables:
            out[file] = keep(file, speakers)
    if segmented:
        recos = {line.split()[1] for line in out["segments"].splitlines() if line.split()}
        for file in RECO_FILES:
            if file in tables:
                out[file] = keep(file, recos)
    return out


def _write_outputs(
    src: Path,
    dest: Path,
    name: str,
    scps: list[Path],
    results: list[tuple[str, int, np.ndarray]],
    utt2spk: dict[str, str],
    skipped: set[str],
) -> None:
    for file, text in filtered_tables(src, skipped).items():
        with atomic_write(dest / file) as f:
            f.write(text)
    with atomic_write(dest / "utt2num_frames") as f:
        f.writelines(f"{utt} {frames}\n" for utt, frames, _ in results)
    with atomic_write(dest / "frame_shift") as f:
        f.write(f"{FRAME_SHIFT}\n")
    speaker_stats: dict[str, np.ndarray] = {}
    for utt, _, stats in results:
        spk = utt2spk[utt]
        speaker_stats[spk] = speaker_stats.get(spk, 0) + stats
    cmvn_ark = dest / "data" / f"cmvn_{name}.ark"
    tmp_scp = dest / "data" / f"cmvn_{name}.scp"
    with ark_writer(cmvn_ark, tmp_scp) as writer:
        for spk in c_sorted(speaker_stats):
            writer(spk, speaker_stats[spk])
    shutil.move(tmp_scp, dest / "cmvn.scp")
    lines = [line for scp in scps for line in scp.read_text().splitlines(keepends=True)]
    with atomic_write(dest / "feats.scp") as f:
        f.writelines(sorted(lines, key=_scp_key))


def feature_summary(dest: str | os.PathLike) -> str:
    """One line about a finished features dir: utterances, frames, dimension."""
    dest = Path(dest)
    frames = [int(v) for v in read_table(dest / "utt2num_frames").values()]
    first = next(iter(kaldiio.load_scp(str(dest / "feats.scp")).values()))
    return (f"{dest}: {len(frames)} utterances, {sum(frames)} frames "
            f"({sum(frames) * FRAME_SHIFT / 3600:.2f} h), dim {first.shape[1]}")
