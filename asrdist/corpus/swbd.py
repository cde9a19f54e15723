"""Switchboard-1 (LDC97S62 + MS98), eval2000 (LDC2002S09 + LDC2002T43) and Fisher (LDC2004S13,
LDC2005S13 + LDC2004T19, LDC2005T19) as the Kaldi data dirs a Kaldi swbd system was built on.

The ids, the train_dev / train_nodup split and the speed-perturbed copies are Kaldi's, so the
user's alignment dir (``exp/tri4_ali_nodup``, ``..._sp``) joins these utterances one to one:
egs/swbd/s5c's without Fisher, egs/fisher_swbd/s5's with it (``recipe``, swbd_text).
Audio stays where the LDC put it: ``wav.scp`` pipes a channel through ``asrdist-sph2wav`` (the
sph2pipe of this project, shorten included), ``segments`` cut the utterances. lhotse's
``prepare_switchboard`` / ``prepare_eval2000`` / ``prepare_fisher_english`` do not fit here:
they read .sph only through the sph2pipe binary, keep MS98 segment ids, do no normalisation
and give both channels one speaker.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import re
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from asrdist.corpus.swbd_text import (
    S5C,
    AcronymMapError,
    acronym_map,
    acronyms_applied,
    extend_segments,
    fisher_line,
    fisher_text,
    map_acronyms,
    ms98_words,
    perl_split,
    speed_prefix,
    swbd_recording,
    swbd_segment_times,
    swbd_utt_id,
    truncated_centiseconds,
)
from asrdist.errors import AsrdistError
from asrdist.fsutil import staged_dir
from asrdist.kaldi.data_dir import c_sorted
from asrdist.kaldi.segments import extractable
from asrdist.kaldi.sphere import sphere_length

log = logging.getLogger(__name__)

CHANNELS = {"A": 1, "B": 2}
EVAL2000_STM = "hub5e00.english.000405.stm"
EVAL2000_GLM = "en20000405_hub5.glm"
EVAL2000_PEM = "hub5e_00.pem"
MS98_LEXICON = "sw-ms98-dict.text"
# utils/data/remove_dup_utts.sh:33-37: its own predictable random numbers.
DUP_P1, DUP_P2 = 103349, 71147
# The sizes of the full releases, as Kaldi's scripts check them: s5c swbd1_data_prep.sh:51-53
# (sph files of LDC97S62, a warning there), fisher_data_prep.sh:78-87 (transcripts and sph
# files of LDC2004/2005), eval2000_data_prep.sh:123-126 (sides in data/eval2000/wav.scp).
SWBD_SPH = (2435, 2438)
FISHER_CALLS = (11699,)
EVAL2000_SIDES = (80,)


@dataclass(frozen=True)
class Segment:
    """One utterance: id, recording (``sw02001-A``), times in the recording, words, the times
    as the segments file writes them (``%.2f`` unless Kaldi's script writes otherwise), the
    speaker when it is not the recording (s5c's sp1.0 copy: ``sp1.0-sw02001-A`` of recording
    ``sw02001-A``) and the text as written when it is not the words joined by single spaces
    (Fisher's, as the transcript has it)."""

    utt: str
    reco: str
    start: float
    end: float
    words: tuple[str, ...]
    times: tuple[str, str] | None = None
    spk: str = ""
    line: str = ""

    def shown(self) -> tuple[str, str]:
        return self.times or (f"{self.start:.2f}", f"{self.end:.2f}")

    @property
    def speaker(self) -> str:
        return self.spk or self.reco

    @property
    def text(self) -> str:
        return self.line or " ".join(self.words)


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


def walk_files(root: Path) -> Iterator[Path]:
    """Every file under ``root``, symlinked folders entered as ``find -L`` enters them (multi-disc
    LDC trees link their discs; Path.rglob does not follow them on Python 3.11): each real
    folder once, so a loop or a disc linked twice is not walked again."""
    seen: set[tuple[int, int]] = set()
    for folder, subfolders, files in os.walk(root, followlinks=True):
        st = os.stat(folder)
        if (st.st_dev, st.st_ino) in seen:
            subfolders[:] = []
            continue
        seen.add((st.st_dev, st.st_ino))
        subfolders.sort()
        for name in files:
            yield Path(folder) / name


def check_count(found: int, expected: tuple[int, ...], what: str, where: str, script: str,
                allow_partial: bool) -> None:
    """Stop when a release is not the size Kaldi's ``script`` checks (a partial copy, a disc not
    mounted), unless ``allow_partial``: then say so and go on."""
    if found in expected:
        return
    sizes = " or ".join(str(n) for n in expected)
    msg = (f"{where}: {found} {what}; Kaldi's {script} expects {sizes} (the full release)")
    if not allow_partial:
        raise AsrdistError(f"{msg}. A partial corpus stops here: --allow-partial goes on with "
                           "what there is")
    log.warning("%s: going on with a partial corpus (--allow-partial)", msg)


def find(root: str | os.PathLike, pattern: str, option: str, expected: str) -> list[Path]:
    """Files matching ``pattern`` under ``root`` (case-insensitive); none is an error that
    names the option and what it should hold."""
    root = Path(root)
    if not root.is_dir():
        raise AsrdistError(f"{option} {root}: no such directory (expected {expected})")
    rx = re.compile(pattern, re.IGNORECASE)
    found = sorted(p for p in walk_files(root) if rx.fullmatch(p.name) and p.is_file())
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
                source: str, extract: bool = False) -> Corpus:
    """Keep the segments whose conversation has audio (utils/fix_data_dir.sh keeps those whose
    recording wav.scp has); fail when none has. With ``extract``, also only those Kaldi's
    extract-segments cuts (run.sh stage 7's make_mfcc.sh, then fix_data_dir.sh)."""
    kept = [s for s in segments if s.reco.rsplit("-", 1)[0] in audio]
    if not kept:
        raise AsrdistError(f"{source}: none of the transcribed conversations has audio "
                           f"(e.g. {segments[0].reco.rsplit('-', 1)[0]}.sph)")
    calls = {s.reco.rsplit("-", 1)[0] for s in segments}
    silent = sorted(calls - set(audio))
    if silent:
        log.warning("%s: %d of %d transcribed conversations have no audio, their %d utterances "
                    "left out (as fix_data_dir.sh leaves them out): %s", source, len(silent),
                    len(calls), len(segments) - len(kept), " ".join(silent))
    if extract:
        lengths = {f: sphere_length(audio[f]) for f in {s.reco.rsplit("-", 1)[0] for s in kept}}
        n = len(kept)
        kept = [s for s in kept if extractable(float(s.shown()[0]), float(s.shown()[1]),
                                               *lengths[s.reco.rsplit("-", 1)[0]])]
        if n != len(kept):
            log.info("%s: %d of %d segments are shorter than 0.1 s or past the end of their "
                     "audio: skipped, as Kaldi's extract-segments skips them", source,
                     n - len(kept), n)
    sources, fc = {}, {}
    for s in kept:
        file, chan = s.reco.rsplit("-", 1)
        sources[s.reco] = (audio[file], chan, 1.0)
        fc[s.reco] = (file, chan)
    return Corpus(kept, sources, fc)


def ms98_acronyms(ms98_dir: str | os.PathLike, recipe: str = S5C
                  ) -> dict[str, tuple[str, str]]:
    """s5c's acronyms.map (fisher_swbd's acronyms_swbd.map) from the MS98 lexicon
    (swbd1_data_prep.sh:45 requires the file)."""
    path = find(ms98_dir, re.escape(MS98_LEXICON), "--ms98",
                f"swb_ms98_transcriptions with its lexicon {MS98_LEXICON}")[0]
    return acronym_map(path.read_text(encoding="latin-1"), recipe)


def switchboard(audio_dir: str | os.PathLike, ms98_dir: str | os.PathLike,
                recipe: str = S5C, allow_partial: bool = False) -> Corpus:
    """Switchboard-1 from LDC97S62 (``sw0NNNN.sph``) and the MS98 word transcripts, as s5c's
    local/swbd1_data_prep.sh and run.sh stage 7 leave data/train (fisher_swbd's copy of the
    script and its run.sh's features: ``recipe``, the same ids and segments). Fewer or more
    sw0NNNN.sph files than the release's 2435 or 2438 stop it unless ``allow_partial``."""
    audio = _audio(audio_dir, r"sw0\d{4}\.sph", "--swbd-audio",
                   "LDC97S62's sw0NNNN.sph files")
    amap = ms98_acronyms(ms98_dir, recipe)
    if not acronyms_applied(amap):
        log.warning("--ms98 %s: the acronym map of its lexicon lacks 'I' or 'i', so Kaldi's "
                    "map_acronyms_transcripts.py stops before writing and swbd1_data_prep.sh "
                    "keeps the text unmapped: so does this one", ms98_dir)
        amap = {}
    segments: dict[str, Segment] = {}
    for path in find(ms98_dir, r"sw\d{4}[AB]-ms98-a-trans\.text", "--ms98",
                     "swb_ms98_transcriptions with sw*-ms98-a-trans.text files"):
        for n, line in enumerate(path.read_text(encoding="latin-1").split("\n"), 1):
            fields = line.split()
            if not fields:
                continue
            try:
                swbd_recording(fields[0])
                start, end = float(fields[1]), float(fields[2])
            except (ValueError, IndexError):
                raise AsrdistError(f"--ms98 {path}:{n}: expected 'sw2001A-ms98-a-0001 start end "
                                   f"words', got {line.strip()!r}") from None
            words = ms98_words(fields[3:], recipe)
            if not words:  # swbd1_data_prep.sh:86
                continue
            if amap:  # s5c swbd1_data_prep.sh:94, fisher_swbd's :86
                try:
                    words = map_acronyms(words, amap, recipe)
                except AcronymMapError as e:
                    raise AsrdistError(
                        f"--ms98 {path}:{n}: {e} stands beside an 'I' but is not in the acronym "
                        "map of the lexicon: Kaldi's map_acronyms_transcripts.py stops here "
                        "(KeyError) and leaves a cut-off text") from None
            utt = swbd_utt_id(fields[0], start, end)
            times = swbd_segment_times(utt)  # swbd1_data_prep.sh:101-106
            # fix_data_dir.sh sorts with "sort -k1,1 -u": of two lines with one id, the first
            segments.setdefault(utt, Segment(utt, utt.split("_")[0], float(times[0]),
                                             float(times[1]), tuple(words), times))
    check_count(len(audio), SWBD_SPH, "sw0NNNN.sph files under it", f"--swbd-audio {audio_dir}",
                "swbd1_data_prep.sh", allow_partial)
    return _recordings(list(segments.values()), audio, f"--ms98 {ms98_dir}", extract=True)


def fisher_lines(text_dirs: Iterable[str], allow_partial: bool = False) -> list[Segment]:
    """The Fisher utterances as fisher_swbd's local/fisher_data_prep.sh writes data/train_fisher:
    per transcript ``fe_03_NNNNN.txt`` (its first line must name its .sph, :117-119), each
    ``start end A: words`` line (fisher_line) as ``fe_03_00001-A-000200-000434`` with the words
    as written; the lines sorted (:136, C locale), those with ``((`` dropped, the markers
    mapped (fisher_text); segments ``%.2f`` of the id's centiseconds (:150-151). Two lines may
    share an id. Other than 11699 transcripts stop it (:78-82) unless ``allow_partial``."""
    lines: list[tuple[str, str]] = []
    text_dirs = list(text_dirs)
    paths = [p for d in text_dirs for p in find(
        d, r"fe_03_\d{5}\.txt", "--fisher-text",
        "LDC2004T19/LDC2005T19's fe_03_NNNNN.txt transcripts")]
    check_count(len(paths), FISHER_CALLS, "fe_03_NNNNN.txt transcripts",
                f"--fisher-text {' '.join(text_dirs)}", "fisher_data_prep.sh", allow_partial)
    for path in paths:
        call = path.name[:-len(".txt")]
        rows = path.read_bytes().decode("latin-1").split("\n")
        m = re.search(r"# (.+)\.sph", rows[0])
        if not m or m.group(1) != call:  # :118-119, where Kaldi's script dies
            raise AsrdistError(f"--fisher-text {path}:1: expected '# {call}.sph', got "
                               f"{rows[0].strip()!r} (Kaldi's fisher_data_prep.sh stops)")
        for n, row in enumerate(rows[1:], 2):
            try:
                parsed = fisher_line(row)
            except ValueError as e:  # :124
                raise AsrdistError(f"--fisher-text {path}:{n}: {e} (Kaldi's "
                                   "fisher_data_prep.sh stops)") from None
            if parsed:
                times, side, words = parsed
                lines.append((f"{call}-{side}-{times}", words))
    lines.sort(key=lambda x: f"{x[0]} {x[1]}".encode("latin-1"))  # :136 sort
    segments = []
    for utt, raw in lines:
        text = fisher_text(raw)
        if text is None:
            continue
        reco, start, end = utt.rsplit("-", 2)
        times = (f"{0.01 * int(start):.2f}", f"{0.01 * int(end):.2f}")
        segments.append(Segment(utt, reco, float(times[0]), float(times[1]),
                                tuple(perl_split(text)), times, line=text))
    return segments


def fisher_segments(text_dirs: Iterable[str], allow_partial: bool = False) -> list[Segment]:
    """fisher_lines, of two with one id the first (fix_data_dir.sh's ``sort -k1,1 -u``, which
    fisher_swbd's run.sh runs on data/train_all)."""
    segments: dict[str, Segment] = {}
    for s in fisher_lines(text_dirs, allow_partial):
        segments.setdefault(s.utt, s)
    return list(segments.values())


def fisher(audio_dirs: Iterable[str], text_dirs: Iterable[str], allow_partial: bool = False
           ) -> Corpus:
    """Fisher English (``fe_03_NNNNN.sph`` and ``.txt``) as fisher_swbd's run.sh leaves its part
    of data/train_all: fisher_segments of the calls with audio (fix_data_dir.sh), less those
    extract-segments skips (make_mfcc.sh, then fix_data_dir.sh). Other than 11699 .sph files or
    transcripts (fisher_data_prep.sh:78-87) stop it unless ``allow_partial``."""
    audio: dict[str, Path] = {}
    audio_dirs = list(audio_dirs)
    for d in audio_dirs:
        audio.update(_audio(d, r"fe_03_\d{5}\.sph", "--fisher-audio",
                            "LDC2004S13/LDC2005S13's fe_03_NNNNN.sph files"))
    segments = fisher_segments(text_dirs, allow_partial)
    check_count(len(audio), FISHER_CALLS, "fe_03_NNNNN.sph files",
                f"--fisher-audio {' '.join(audio_dirs)}", "fisher_data_prep.sh", allow_partial)
    return _recordings(segments, audio, "--fisher-text", extract=True)


def _fixed_stm(stm: str) -> str:
    """eval2000_data_prep.sh:87-88 (sed): each line's first ``((`` becomes ``(``, the aside
    tags go."""
    return "".join(line.replace("((", "(", 1).replace("<B_ASIDE>", "").replace("<E_ASIDE>", "")
                   for line in stm.splitlines(keepends=True))


def _eval2000_id(fields: list[str], where: str) -> str:
    try:  # eval2000_data_prep.sh:69-70 and :80-81
        return (f"{fields[0]}-{fields[1]}_{truncated_centiseconds(fields[3]):06d}"
                f"-{truncated_centiseconds(fields[4]):06d}")
    except (IndexError, ValueError):
        raise AsrdistError(f"{where}: expected 'file side speaker start end ...', got "
                           f"{' '.join(fields)!r}") from None


def eval2000(audio_dir: str | os.PathLike, ref_dir: str | os.PathLike, extend: bool = True,
             allow_partial: bool = False) -> tuple[Corpus, str, str]:
    """eval2000 (hub5'00 English) as s5c's local/eval2000_data_prep.sh and run.sh stage 7 leave
    data/eval2000: the segments of LDC2002S09's pem file, extended, with the stm's words;
    and the fixed stm and the glm of LDC2002T43. Without ``extend``, as fisher_swbd's copy of
    the script (its :63-68 has no extend_segments.pl: the pem's times as written) and its
    run.sh's fix_data_dir.sh and features leave it."""
    audio = _audio(audio_dir, r"(sw|en)_\d{4}\.sph", "--eval2000-audio",
                   "LDC2002S09's hub5e_00/english/{sw,en}_NNNN.sph")
    pem_path = find(audio_dir, re.escape(EVAL2000_PEM), "--eval2000-audio",
                    f"LDC2002S09's hub5e_00/english/{EVAL2000_PEM}")[0]
    stm_path = find(ref_dir, re.escape(EVAL2000_STM), "--eval2000-ref",
                    f"LDC2002T43's reference/{EVAL2000_STM}")[0]
    glm_path = find(ref_dir, re.escape(EVAL2000_GLM), "--eval2000-ref",
                    f"LDC2002T43's reference/{EVAL2000_GLM}")[0]
    rows = set()
    for n, line in enumerate(pem_path.read_text(encoding="latin-1").split("\n"), 1):
        fields = line.split()
        if ";;" in line or not fields:  # :67 grep -v ';;'
            continue
        rows.add((_eval2000_id(fields, f"--eval2000-audio {pem_path}:{n}"),
                  f"{fields[0]}-{fields[1]}", fields[3], fields[4]))
    ordered = sorted(rows, key=lambda r: " ".join(r).encode())  # :72 sort -u
    extended = extend_segments(ordered, 0.1) if extend else ordered  # :72 extend_segments.pl
    raw_stm = stm_path.read_text(encoding="latin-1")
    text_all = []
    for n, line in enumerate(raw_stm.split("\n"), 1):
        fields = line.split()
        if ";;" in line or not fields:  # :78
            continue
        text_all.append(" ".join([_eval2000_id(fields, f"--eval2000-ref {stm_path}:{n}"),
                                  *fields[6:]]))
    text_all.sort(key=str.encode)  # :83
    stm_ids, pem_ids = [t.split()[0] for t in text_all], [r[0] for r in ordered]
    if stm_ids != pem_ids:  # :93-94, where Kaldi's script stops
        diff = sorted(set(stm_ids) ^ set(pem_ids))[:3]
        raise AsrdistError(f"--eval2000-ref {stm_path}: its segments and those of {pem_path} "
                           f"differ (e.g. {diff}); Kaldi's eval2000_data_prep.sh stops here")
    text: dict[str, list[str]] = {}
    for t in text_all:
        if "IGNORE_TIME_SEGMENT_" not in t:  # :96
            utt, *words = t.split()
            text.setdefault(utt, words)
    segments: dict[str, Segment] = {}
    for utt, reco, s, e in extended:  # fix_data_dir.sh: with text; of one id, the first line
        if utt in text and utt not in segments:
            segments[utt] = Segment(utt, reco, float(s), float(e), tuple(text[utt]), (s, e))
    corpus = _recordings(list(segments.values()), audio, f"--eval2000-ref {stm_path}",
                         extract=True)
    check_count(len(corpus.audio), EVAL2000_SIDES, "conversation sides with segments and audio",
                f"--eval2000-audio {audio_dir}", "eval2000_data_prep.sh", allow_partial)
    return corpus, _fixed_stm(raw_stm), glm_path.read_text(encoding="latin-1")


def remove_dup_utts(utts: list[str], text: dict[str, tuple[str, ...]], max_count: int
                    ) -> list[str]:
    """utils/data/remove_dup_utts.sh: every utterance whose transcript occurs fewer than
    ``max_count`` times in the set (:50), the others each kept with probability max_count/n
    from the script's own generator ``k = (k + 103349) % 71147`` (:33-37), drawn only for
    those, in the order of the (sorted) text file. About ``max_count`` of each stay, not at
    most ``max_count``."""
    counts = Counter(text[u] for u in utts)
    k = 0
    kept = []
    for utt in utts:
        n = counts[text[utt]]
        if n < max_count:
            kept.append(utt)
            continue
        k = (k + DUP_P1) % DUP_P2
        if k / DUP_P2 < max_count / n:
            kept.append(utt)
    return kept


def nodup(corpus: Corpus, max_dup: int) -> Corpus:
    """fisher_swbd run.sh: ``remove_dup_utts.sh 300 data/train data/train_nodup`` over the whole
    set (Fisher + all of Switchboard, in the order of its sorted ids; no train_dev)."""
    text = {s.utt: s.words for s in corpus.segments}
    return corpus.subset(remove_dup_utts(c_sorted(text), text, max_dup))


def dev_and_nodup(corpus: Corpus, dev_utts: int, max_dup: int) -> tuple[Corpus, Corpus]:
    """s5c run.sh stage 8: train_dev = the first ``dev_utts`` utterances (sorted ids,
    ``subset_data_dir.sh --first``), train_nodup = the rest (``--last``) with
    ``remove_dup_utts.sh max_dup``."""
    utts = c_sorted(s.utt for s in corpus.segments)
    if dev_utts >= len(utts):
        raise AsrdistError(f"--dev-utts {dev_utts}: the training set has only {len(utts)} "
                           "utterances")
    text = {s.utt: s.words for s in corpus.segments}
    nodup = remove_dup_utts(utts[dev_utts:], text, max_dup)
    return corpus.subset(utts[:dev_utts]), corpus.subset(nodup)


def speed_perturbed(corpus: Corpus, factors: Iterable[float], prefix_1_0: bool = True
                    ) -> Corpus:
    """Kaldi's perturb_data_dir_speed_3way.sh copies: ids prefixed ``sp0.9-``, audio played
    faster or slower. With ``prefix_1_0`` (``--always-include-prefix true``, s5c's
    run_ivector_common.sh) the 1.0 copy is copy_data_dir.sh's (perturb_data_dir_speed_3way.sh
    :69): utterances and speakers prefixed ``sp1.0-``, its recordings and segment times as they
    were; without (fisher_swbd's run_ivector_common.sh:20, the script's default) it is the
    source dir itself (:79, combine_data.sh of the source). The others' times are divided by
    the factor, written ``%.2f``, and a segment goes unless it ends more than 0.01 s after it starts
    (utils/data/perturb_data_dir_speed.sh:96-97), or when extract-segments would skip it in
    the perturbed audio (run_ivector_common.sh makes features, then fix_data_dir.sh; the perturbed
    length taken as ``int(samples / factor)``, sox's own within a sample or so)."""
    out = Corpus([], {}, {})
    lengths = {sph: sphere_length(sph) for sph, _, _ in corpus.audio.values()}
    for f in factors:
        p = speed_prefix(f)
        segs = []
        if f == 1.0 and not prefix_1_0:
            out = out + corpus
            continue
        for s in corpus.segments:
            # the text through utils/apply_map.pl (perturb_data_dir_speed.sh:121,
            # copy_data_dir.sh): the words joined by single spaces
            if f == 1.0:
                segs.append(dataclasses.replace(s, utt=p + s.utt, spk=p + s.speaker, line=""))
                continue
            start, end = (float(t) / f for t in s.shown())
            shown = (f"{start:.2f}", f"{end:.2f}")
            samples, rate = lengths[corpus.audio[s.reco][0]]
            if end > start + 0.01 and extractable(float(shown[0]), float(shown[1]),
                                                  int(samples / f), rate):
                segs.append(dataclasses.replace(s, utt=p + s.utt, reco=p + s.reco, start=start,
                                                end=end, times=shown, spk="", line=""))
        reco = "" if f == 1.0 else p
        audio = {reco + r: (sph, chan, speed * f)
                 for r, (sph, chan, speed) in corpus.audio.items()}
        out = out + Corpus(segs, audio,
                           {reco + r: fc for r, fc in corpus.file_and_channel.items()})
    return out


def write_corpus(directory: str | os.PathLike, corpus: Corpus,
                 extra: dict[str, str] | None = None) -> None:
    """A Kaldi data dir: wav.scp, segments, text, utt2spk, spk2utt, reco2file_and_channel
    (speaker = recording-channel, as Kaldi's swbd and eval2000 dirs, but for sp1.0 copies),
    plus ``extra`` files."""
    segs = {s.utt: s for s in corpus.segments}
    ids = c_sorted(segs)
    spk2utt: dict[str, list[str]] = {}
    for utt in ids:
        spk2utt.setdefault(segs[utt].speaker, []).append(utt)
    tables = {
        "wav.scp": [f"{r} {wav_entry(*corpus.audio[r])}" for r in c_sorted(corpus.audio)],
        "segments": [f"{u} {segs[u].reco} {' '.join(segs[u].shown())}" for u in ids],
        "text": [f"{u} {segs[u].text}" for u in ids],
        "utt2spk": [f"{u} {segs[u].speaker}" for u in ids],
        "spk2utt": [f"{s} {' '.join(us)}" for s, us in sorted(spk2utt.items(),
                                                            key=lambda x: x[0].encode())],
        "reco2file_and_channel": [f"{r} {' '.join(corpus.file_and_channel[r])}"
                                  for r in c_sorted(corpus.file_and_channel)],
    }
    with staged_dir(directory) as tmp:
        for name, lines in tables.items():  # the text in the bytes it was read in
            (tmp / name).write_text("".join(line + "\n" for line in lines),
                                    encoding="latin-1" if name == "text" else "utf-8")
        for name, content in (extra or {}).items():
            (tmp / name).write_text(content, encoding="latin-1")  # stm, glm: as read
