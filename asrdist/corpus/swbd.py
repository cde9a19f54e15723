"""Switchboard-1 (LDC97S62 + MS98), eval2000 (LDC2002S09 + LDC2002T43) and Fisher (LDC2004S13,
LDC2005S13 + LDC2004T19, LDC2005T19) as the Kaldi data dirs a Kaldi swbd system was built on.

The ids, the train_dev / train_nodup split and the speed-perturbed copies are Kaldi's, so the
user's alignment dir (``exp/tri4_ali_nodup``, ``..._sp``) joins these utterances one to one.
Audio stays where the LDC put it: ``wav.scp`` pipes a channel through ``asrdist-sph2wav`` (the
sph2pipe of this project, shorten included), ``segments`` cut the utterances. lhotse's
``prepare_switchboard`` / ``prepare_eval2000`` / ``prepare_fisher_english`` do not fit here:
they read .sph only through the sph2pipe binary, keep MS98 segment ids, do no normalisation
and give both channels one speaker.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from asrdist.corpus.swbd_text import (
    centiseconds,
    normalise_fisher,
    normalise_ms98,
    speed_prefix,
    swbd_recording,
    utt_id,
)
from asrdist.errors import AsrdistError
from asrdist.fsutil import staged_dir
from asrdist.kaldi.data_dir import c_sorted

CHANNELS = {"A": 1, "B": 2}
EVAL2000_STM = "hub5e00.english.000405.stm"
EVAL2000_GLM = "en20000405_hub5.glm"


@dataclass(frozen=True)
class Segment:
    """One utterance: id, recording (``sw02001-A``), times in the recording, words."""

    utt: str
    reco: str
    start: float
    end: float
    words: tuple[str, ...]

    @classmethod
    def kaldi(cls, file: str, chan: str, start: float, end: float, words: list[str]) -> Segment:
        """As Kaldi's data prep makes it: the times are those of the id (10 ms), so the
        features have the frame count of the user's alignments."""
        return cls(utt_id(file, chan, start, end), f"{file}-{chan}", centiseconds(start) / 100,
                   centiseconds(end) / 100, tuple(words))


@dataclass
class Corpus:
    """Utterances and the recordings they cut: enough for a Kaldi data dir."""

    segments: list[Segment]
    audio: dict[str, tuple[Path, str, float]]  # reco -> (sph file, channel A|B, speed)
    file_and_channel: dict[str, tuple[str, str]]  # reco -> (LDC file id, A|B)

    def subset(self, utts: Iterable[str]) -> Corpus:
        keep = set(utts)
        segs = [s for s in self.segments if s.utt in keep]
        recos = {s.reco for s in segs}
        return Corpus(segs, {r: a for r, a in self.audio.items() if r in recos},
                      {r: f for r, f in self.file_and_channel.items() if r in recos})

    def __add__(self, other: Corpus) -> Corpus:
        return Corpus(self.segments + other.segments, {**self.audio, **other.audio},
                      {**self.file_and_channel, **other.file_and_channel})


def find(root: str | os.PathLike, pattern: str, option: str, expected: str) -> list[Path]:
    """Files matching ``pattern`` under ``root`` (case-insensitive); none is an error that
    names the option and what it should hold."""
    root = Path(root)
    if not root.is_dir():
        raise AsrdistError(f"{option} {root}: no such directory (expected {expected})")
    rx = re.compile(pattern, re.IGNORECASE)
    found = sorted(p for p in root.rglob("*") if rx.fullmatch(p.name) and p.is_file())
    if not found:
        raise AsrdistError(f"{option} {root}: no {pattern!r} files under it (expected {expected})")
    return found


def wav_entry(sph: Path, channel: str, speed: float = 1.0) -> str:
    """The wav.scp value: one channel of a SPHERE file through asrdist-sph2wav (sph2pipe)."""
    speed_opt = f" --speed {speed:g}" if speed != 1.0 else ""
    return f"asrdist-sph2wav -c {CHANNELS[channel]}{speed_opt} {sph.resolve()} |"


def _audio(root: str | os.PathLike, pattern: str, option: str, expected: str) -> dict[str, Path]:
    return {p.stem.lower(): p for p in find(root, pattern, option, expected)}


def _recordings(segments: list[Segment], audio: dict[str, Path],
                source: str) -> Corpus:
    """Keep the segments whose conversation has audio; fail when none has."""
    kept = [s for s in segments if s.reco.rsplit("-", 1)[0] in audio]
    if not kept:
        raise AsrdistError(f"{source}: none of the transcribed conversations has audio "
                           f"(e.g. {segments[0].reco.rsplit('-', 1)[0]}.sph)")
    sources, fc = {}, {}
    for s in kept:
        file, chan = s.reco.rsplit("-", 1)
        sources[s.reco] = (audio[file], chan, 1.0)
        fc[s.reco] = (file, chan)
    return Corpus(kept, sources, fc)


def switchboard(audio_dir: str | os.PathLike, ms98_dir: str | os.PathLike) -> Corpus:
    """Switchboard-1 from LDC97S62 (``sw0NNNN.sph``) and the MS98 word transcripts."""
    audio = _audio(audio_dir, r"sw0\d{4}\.sph", "--swbd-audio",
                   "LDC97S62's sw0NNNN.sph files")
    segments = []
    for path in find(ms98_dir, r"sw\d{4}[AB]-ms98-a-trans\.text", "--ms98",
                     "swb_ms98_transcriptions with sw*-ms98-a-trans.text files"):
        for n, line in enumerate(path.read_text(encoding="latin-1").splitlines(), 1):
            fields = line.split()
            if not fields:
                continue
            try:
                rec, chan = swbd_recording(fields[0])
                start, end = float(fields[1]), float(fields[2])
            except (ValueError, IndexError):
                raise AsrdistError(f"--ms98 {path}:{n}: expected 'sw2001A-ms98-a-0001 start end "
                                   f"words', got {line.strip()!r}") from None
            words = normalise_ms98(fields[3:])
            if words and end > start:
                segments.append(Segment.kaldi(rec, chan, start, end, words))
    return _recordings(segments, audio, f"--ms98 {ms98_dir}")


def fisher(audio_dirs: Iterable[str], text_dirs: Iterable[str]) -> Corpus:
    """Fisher English (``fe_03_NNNNN.sph`` and ``.txt`` with ``start end A: words`` lines)."""
    audio: dict[str, Path] = {}
    for d in audio_dirs:
        audio.update(_audio(d, r"fe_03_\d{5}\.sph", "--fisher-audio",
                            "LDC2004S13/LDC2005S13's fe_03_NNNNN.sph files"))
    segments = []
    for d in text_dirs:
        for path in find(d, r"fe_03_\d{5}\.txt", "--fisher-text",
                         "LDC2004T19/LDC2005T19's fe_03_NNNNN.txt transcripts"):
            call = path.stem.lower()
            for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                if not line.strip() or line.startswith("#"):
                    continue
                m = re.fullmatch(r"\s*([\d.]+)\s+([\d.]+)\s+([AB]):\s*(.*)", line)
                if not m:
                    raise AsrdistError(f"--fisher-text {path}:{n}: expected 'start end A: "
                                       f"words', got {line.strip()!r}")
                start, end, chan = float(m.group(1)), float(m.group(2)), m.group(3)
                words = normalise_fisher(m.group(4))
                if words and end > start:
                    segments.append(Segment.kaldi(call, chan, start, end, words))
    return _recordings(segments, audio, "--fisher-text")


def _fixed_stm_line(line: str) -> str:
    """Kaldi's eval2000_data_prep.sh fixes of the LDC stm: ``((`` and the aside tags."""
    return line.replace("((", "(").replace("<B_ASIDE>", "").replace("<E_ASIDE>", "")


def eval2000(audio_dir: str | os.PathLike, ref_dir: str | os.PathLike) -> tuple[Corpus, str, str]:
    """eval2000 (hub5'00 English): the data, the fixed stm and the glm of LDC2002T43."""
    audio = _audio(audio_dir, r"(sw|en)_\d{4}\.sph", "--eval2000-audio",
                   "LDC2002S09's hub5e_00/english/{sw,en}_NNNN.sph")
    stm_path = find(ref_dir, re.escape(EVAL2000_STM), "--eval2000-ref",
                    f"LDC2002T43's reference/{EVAL2000_STM}")[0]
    glm_path = find(ref_dir, re.escape(EVAL2000_GLM), "--eval2000-ref",
                    f"LDC2002T43's reference/{EVAL2000_GLM}")[0]
    stm = [_fixed_stm_line(x) for x in stm_path.read_text(encoding="latin-1").splitlines()]
    segments = []
    for n, line in enumerate(stm, 1):
        fields = line.split()
        if not fields or line.startswith(";;"):
            continue
        try:
            file, chan, start, end = fields[0], fields[1], float(fields[3]), float(fields[4])
        except (IndexError, ValueError):
            raise AsrdistError(f"--eval2000-ref {stm_path}:{n}: not an stm line: "
                               f"{line.strip()!r}") from None
        text = [w for w in fields[5:] if not (w.startswith("<") and w.endswith(">"))]
        if "IGNORE_TIME_SEGMENT_IN_SCORING" in text:
            continue
        words = [w.strip("()").lower() for w in text if w.strip("()")]
        segments.append(Segment.kaldi(file, chan, start, end, words))
    corpus = _recordings(segments, audio, f"--eval2000-ref {stm_path}")
    return corpus, "\n".join(stm) + "\n", glm_path.read_text(encoding="latin-1")


def dev_and_nodup(corpus: Corpus, dev_utts: int, max_dup: int) -> tuple[Corpus, Corpus]:
    """Kaldi's split: train_dev = the first ``dev_utts`` utterances (sorted ids); train_nodup
    = the rest with at most ``max_dup`` utterances of any one transcript (remove_dup_utts.sh)."""
    utts = c_sorted(s.utt for s in corpus.segments)
    if dev_utts >= len(utts):
        raise AsrdistError(f"--dev-utts {dev_utts}: the training set has only {len(utts)} "
                           "utterances")
    dev = set(utts[:dev_utts])
    text = {s.utt: s.words for s in corpus.segments}
    seen: Counter = Counter()
    nodup = []
    for utt in utts[dev_utts:]:
        seen[text[utt]] += 1
        if seen[text[utt]] <= max_dup:
            nodup.append(utt)
    return corpus.subset(dev), corpus.subset(nodup)


def speed_perturbed(corpus: Corpus, factors: Iterable[float]) -> Corpus:
    """Kaldi's perturb_data_dir_speed.sh copies (``--always-include-prefix true``): ids
    prefixed ``sp0.9-``, segment times divided by the factor, audio played faster or slower."""
    out = Corpus([], {}, {})
    for f in factors:
        p = speed_prefix(f)
        segs = [Segment(p + s.utt, p + s.reco, s.start / f, s.end / f, s.words)
                for s in corpus.segments]
        audio = {p + r: (sph, chan, speed * f) for r, (sph, chan, speed) in corpus.audio.items()}
        out = out + Corpus(segs, audio, {p + r: fc for r, fc in corpus.file_and_channel.items()})
    return out


def write_corpus(directory: str | os.PathLike, corpus: Corpus,
                 extra: dict[str, str] | None = None) -> None:
    """A Kaldi data dir: wav.scp, segments, text, utt2spk, spk2utt, reco2file_and_channel
    (speaker = recording-channel, as Kaldi's swbd and eval2000 dirs), plus ``extra`` files."""
    segs = {s.utt: s for s in corpus.segments}
    ids = c_sorted(segs)
    spk2utt: dict[str, list[str]] = {}
    for utt in ids:
        spk2utt.setdefault(segs[utt].reco, []).append(utt)
    tables = {
        "wav.scp": [f"{r} {wav_entry(*corpus.audio[r])}" for r in c_sorted(corpus.audio)],
        "segments": [f"{u} {segs[u].reco} {segs[u].start:.2f} {segs[u].end:.2f}" for u in ids],
        "text": [f"{u} {' '.join(segs[u].words)}" for u in ids],
        "utt2spk": [f"{u} {segs[u].reco}" for u in ids],
        "spk2utt": [f"{s} {' '.join(us)}" for s, us in sorted(spk2utt.items(),
                                                            key=lambda x: x[0].encode())],
        "reco2file_and_channel": [f"{r} {' '.join(corpus.file_and_channel[r])}"
                                  for r in c_sorted(corpus.file_and_channel)],
    }
    with staged_dir(directory) as tmp:
        for name, lines in tables.items():
            (tmp / name).write_text("".join(line + "\n" for line in lines))
        for name, content in (extra or {}).items():
            (tmp / name).write_text(content)
