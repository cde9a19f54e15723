"""A miniature LDC tree shaped like the real releases, with speech made on the spot.

Switchboard-1 (LDC97S62 ``sw0NNNN.sph`` + MS98 ``swb_ms98_transcriptions``), eval2000
(LDC2002S09 ``hub5e_00/english/*.sph`` + LDC2002T43 ``reference/*.stm, *.glm``) and Fisher
(LDC2004S13 audio + LDC2004T19 transcripts). Every .sph is two-channel 8 kHz mu-law with
embedded shorten, as the LDC ships it; each transcribed segment is spoken by espeak-ng at its
place on its channel, so the times in the transcripts are where the speech is.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from asrdist.corpus.espeak import synthesize
from asrdist.testing.sphere_writer import write_sphere

RATE = 8000
VOICES = {"A": "en-us+m1", "B": "en-us+f2"}

# MS98 lines per conversation side: (words as the transcriber wrote them, None = [silence]).
SWBD = {
    "2001": {
        "A": ["[silence]", "hi um how are you doing today", "[noise] i think that is right",
              "we went to dallas last year [laughter]", "yeah", "[silence]",
              "you know it is okay"],
        "B": ["[silence]", "uh i am doing fine thanks", "[laughter-yes] that is true",
              "th[e]- the weather is nice", "yeah", "we went to the game"],
    },
    "2005": {
        "A": ["so what do you think about it", "[vocalized-noise] i do not know",
              "yeah", "-[th]at is a good one", "we like the {weatherization} program"],
        "B": ["i think it is okay", "[bocce/botchy] is a game", "yeah",
              "um we went to dallas", "that is right_1 you know"],
    },
}

# eval2000: (file, side) -> segments (stm text); one IGNORE segment, labels, (%hesitation).
EVAL = {
    ("sw_4390", "A"): ["i think that is right", "(%hesitation) we went to dallas",
                       "IGNORE_TIME_SEGMENT_IN_SCORING"],
    ("sw_4390", "B"): ["yeah you know", "the weather is nice"],
    ("en_4156", "A"): ["how are you doing", "i am fine thanks"],
    ("en_4156", "B"): ["that is a good one (uh)", "we like the game"],
}

EVAL_GLM = """;;
* name "en20000405_hub5.glm (miniature)"
* desc "hesitations and alternatives as the hub5 GLM writes them"
* format = 'NIST1'
* max_nrules = '1000'
* copy_no_hit = 'T'
* case_sensitive = 'F'
[UH] => [%HESITATION] / [ ] __ [ ]
[UM] => [%HESITATION] / [ ] __ [ ]
[OKAY] => [{OKAY / OK}] / [ ] __ [ ]
;;  INPUT_DEPENDENT_APPLICATION = "ctm"
[I'M] => [{I'M / I AM}] / [ ] __ [ ]
"""

# The MS98 lexicon (swb_ms98_transcriptions/sw-ms98-dict.text): comment lines, then ``word
# phones``; acronyms are written as words and pronounced letter by letter (s5c's
# swbd1_prepare_dict.sh finds them there: IBM -> i._b._m.).
MS98_DICT = """# sw-ms98-dict.text (miniature): Mississippi State Switchboard lexicon
# word  phones
Dallas d ae l ax s
I ay
IBM ay b iy eh m
IBM's ay b iy eh m z
NBA eh n b iy ey
TV t iy v iy
TVs t iy v iy z
Texas t eh k s ax s
UCLA y uw s iy eh l ey
[laughter-TV] t iy v iy
a ax
about ax b aw t
i ay
ok ow k ey
okay ow k ey
right r ay t
tv t iy v iy
uh-huh ax hh ax
um-hum ax m hh ax m
yeah y ae
{weatherization} w eh dh er ax z ey sh ax n
"""

FISHER = {
    "00001": [("A", "hello how are you"), ("B", "i am fine ((thanks))"),
              ("A", "[laugh] that is right"), ("B", "we went to the game")],
}


@dataclass(frozen=True)
class LdcTree:
    """Paths a user would pass to the recipes' options."""

    swbd_audio: Path
    ms98: Path
    eval2000_audio: Path
    eval2000_ref: Path
    fisher_audio: Path
    fisher_text: Path
    fisher_audio2: Path | None = None  # make_prep_tree: LDC2005S13 (fe_03_p2_sph*)
    fisher_text2: Path | None = None  # make_prep_tree: LDC2005T19 (fe_03_p2_tran)


def _spoken(text: str) -> str:
    """What espeak says for a transcript line: the words, without markers."""
    words = []
    for w in text.replace("((", "").replace("))", "").split():
        if w.startswith("[") or w.startswith("<") or w == "IGNORE_TIME_SEGMENT_IN_SCORING":
            continue
        words.append(w.strip("(){}-").split("[")[0].split("_")[0].replace("%hesitation", "uh"))
    return " ".join(w for w in words if w)


def _channel(lines: list[str], voice: str, rng: np.random.Generator
             ) -> tuple[np.ndarray, list[tuple[float, float, str]]]:
    """Speak each line after a pause; returns the channel's samples and (start, end, text).

    Each line gets a slot of a length set by its word count alone (espeak's speech, ~0.3 s a
    word at this rate, is padded to it), so the times, and with them the data dirs Kaldi's
    scripts make of this tree (tests/recipes/kaldi_made), do not depend on espeak's version."""
    pieces, times, t = [], [], 0.0
    for text in lines:
        gap = np.zeros(int(rng.uniform(0.2, 0.5) * RATE))
        said = _spoken(text)
        speech = np.zeros(int((0.3 + 0.35 * len(said.split()) if said else 0.6) * RATE))
        if said:
            voiced = synthesize(said, voice, rate=190, sample_rate=RATE)[:speech.size] * 0.5
            speech[:voiced.size] = voiced
        start = t + len(gap) / RATE
        pieces += [gap, speech]
        t = start + len(speech) / RATE
        times.append((round(start, 2), round(t, 2), text))
    return np.concatenate(pieces), times


def _conversation(sides: dict[str, list[str]], rng: np.random.Generator
                  ) -> tuple[np.ndarray, dict[str, list[tuple[float, float, str]]]]:
    chans = {s: _channel(lines, VOICES[s], rng) for s, lines in sides.items()}
    n = max(len(a) for a, _ in chans.values()) + RATE // 4
    audio = np.zeros((n, 2))
    for i, s in enumerate("AB"):
        a = chans[s][0]
        audio[:len(a), i] = a
    audio += rng.normal(0, 0.002, audio.shape)
    return np.round(audio * 32767).astype(np.int16), {s: c[1] for s, c in chans.items()}


def make_ldc_tree(root: Path, seed: int = 0) -> LdcTree:
    """Write the miniature releases under ``root``; returns the option paths."""
    rng = np.random.default_rng(seed)
    tree = LdcTree(root / "LDC97S62", root / "swb_ms98_transcriptions", root / "LDC2002S09",
                   root / "LDC2002T43", root / "LDC2004S13", root / "LDC2004T19")
    for conv, sides in SWBD.items():
        audio, times = _conversation(sides, rng)
        write_sphere(tree.swbd_audio / "swb1_d1" / "data" / f"sw0{conv}.sph", audio)
        for side, segs in times.items():
            path = tree.ms98 / conv[:2] / conv / f"sw{conv}{side}-ms98-a-trans.text"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("".join(
                f"sw{conv}{side}-ms98-a-{k:04d} {s:.6f} {e:.6f} {text}\n"
                for k, (s, e, text) in enumerate(segs, 1)))
    (tree.ms98 / "sw-ms98-dict.text").write_text(MS98_DICT)
    stm = [';; LABEL "O" "Overall" "Overall"', ';; LABEL "F" "Female" "Female speakers"',
           ';; LABEL "M" "Male" "Male speakers"']
    for file in ("sw_4390", "en_4156"):
        audio, times = _conversation({s: EVAL[(file, s)] for s in "AB"}, rng)
        write_sphere(tree.eval2000_audio / "hub5e_00" / "english" / f"{file}.sph", audio)
        for side, segs in times.items():
            label = "<O,M>" if side == "A" else "<O,F>"
            stm += [f"{file} {side} {file}_{side} {s:.2f} {e:.2f} {label} {text}"
                    for s, e, text in segs]
    _write_pem(tree.eval2000_audio / "hub5e_00" / "english" / "hub5e_00.pem", stm)
    ref = tree.eval2000_ref / "reference"
    ref.mkdir(parents=True)
    (ref / "hub5e00.english.000405.stm").write_text("\n".join(stm) + "\n")
    (ref / "en20000405_hub5.glm").write_text(EVAL_GLM)
    for call, turns in FISHER.items():
        sides = {s: [t for side, t in turns if side == s] for s in "AB"}
        audio, times = _conversation(sides, rng)
        write_sphere(tree.fisher_audio / "fe_03_p1_sph1" / "audio" / "000" / f"fe_03_{call}.sph",
                     audio)
        lines = [f"{s:.2f} {e:.2f} {side}: {text}" for side in "AB" for s, e, text in times[side]]
        txt = tree.fisher_text / "fe_03_p1_tran" / "data" / "trans" / "000" / f"fe_03_{call}.txt"
        txt.parent.mkdir(parents=True, exist_ok=True)
        txt.write_text(f"# fe_03_{call}.sph\n# Transcribed at the LDC\n\n"
                       + "\n".join(sorted(lines, key=lambda x: float(x.split()[0]))) + "\n")
    return tree


def _write_pem(path: Path, stm: list[str]) -> None:
    """LDC2002S09's hub5e_00.pem: the segments to recognise, as the stm times them."""
    lines = [";; hub5e_00.pem: partitioned evaluation map", ";; file side speaker start end"]
    for line in stm:
        if not line.startswith(";;"):
            f = line.split()
            lines.append(f"{f[0]} {f[1]} unknown_speaker {f[3]} {f[4]}")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")


# The transcript tree whose data dirs Kaldi's own scripts made (tests/corpus/kaldi_expected):
# many conversations, text only (the .sph files hold silence of the right length), with the
# real releases' awkward parts. Lines spoken well over 300 times across conversations:
FILLERS = ["uh-huh", "yeah", "um-hum", "uh-huh", "yeah", "uh-huh", "okay", "oh", "uh-huh",
           "i know", "that's true", "oh really", "[noise]", "[laughter]", "yeah"]
# One per conversation side, in order (conversation 2004 on): swbd1_map_words.pl's cases,
# [silence] and asides as s5c's swbd1_data_prep.sh removes them, acronyms of the lexicon.
SPECIAL = [
    "-[laughter-yes] okay", "[laughter-yes] that is true", "[LAUGHTER-Yes] i see",
    "we [laughter-sto]- stopped", "the ammu[n]it- was gone", "ex[specially]-/especially] now",
    "[lem[guini]-/linguini] with sauce", "[an]y ab[solute] time", "them_1's right_1",
    "a {weatherization} program", "[it'n/isn't] it", "-[laughter-story]- and then",
    "we went [silence] [silence] home", "[silence] [silence]", "[silence]", "[noise]",
    "[vocalized-noise] well", "<b_aside> hold on <e_aside>", "<b_aside>",
    "i worked at IBM", "IBM's stock went up", "we watch TV", "two TVs", "[laughter-TV] show",
    "I B M was hiring", "I think so", "vitamin C", "it's ok", "she went to UCLA",
    "we went to Dallas Texas", "th[e]- the weather", "-[th]at one", "[bocce/botchy] is a game",
    "the NBA and the tv", "about [silence]",
]
PREP_CONVS = [f"{n}" for n in range(2001, 2032)] + ["2151"]
RIGHT_TOTAL = 300  # "right", all outside train_dev: seen exactly max-count times


def _ms98_lines(rng: np.random.Generator, texts: list[str], t: float,
                ) -> tuple[list[tuple[float, float, str]], float]:
    out = []
    for text in texts:
        start = t + rng.uniform(0.15, 0.9)
        end = start + 0.25 * len(text.split()) + rng.uniform(0.05, 0.6)
        out.append((start, end, text))
        t = end
    return out, t


def make_prep_tree(root: Path, seed: int = 21) -> LdcTree:
    """Switchboard-1 + MS98, eval2000 and Fisher (both releases) trees for the data prep alone:
    transcripts with the real releases' awkward parts, silent audio whose lengths are the
    transcripts' (one side ends early, one conversation has no audio, one recording no
    transcript). Fisher comes from its own generator, so the other trees are as they were."""
    rng = np.random.default_rng(seed)
    tree = LdcTree(root / "LDC97S62", root / "swb_ms98_transcriptions", root / "LDC2002S09",
                   root / "LDC2002T43", root / "LDC2004S13", root / "LDC2004T19",
                   root / "LDC2005S13", root / "LDC2005T19")
    specials = iter(SPECIAL)
    sides = [(c, s) for c in PREP_CONVS for s in "AB"]
    late = [cs for cs in sides if "2004" <= cs[0] <= "2028" or cs[0] == "2151"]
    rights = {cs: RIGHT_TOTAL // len(late) + (k < RIGHT_TOTAL % len(late))
              for k, cs in enumerate(late)}
    for conv in PREP_CONVS:
        end_of = {}
        for side in "AB":
            texts = list(rng.choice(FILLERS, size=30))
            texts += [f"so what do you think about number {conv} {side} {k}" for k in range(3)]
            texts += ["right"] * rights.get((conv, side), 0)
            rng.shuffle(texts)
            if conv >= "2004":
                texts.insert(int(rng.integers(0, len(texts))), next(specials, "well"))
            lines = []
            t = 0.4
            if conv in ("2005", "2001"):  # too short for extract-segments (< 0.1 s in float)
                lines = [(1.0, 1.1, "uh"), (1.5, 1.55, "oh"), (2.0, 2.11, "yes"),
                         (2.4, 2.5, "no")]
                t = 2.6
            more, t = _ms98_lines(rng, texts, t)
            lines += more
            end_of[side] = t
            path = tree.ms98 / conv[:2] / conv / f"sw{conv}{side}-ms98-a-trans.text"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("".join(f"sw{conv}{side}-ms98-a-{k:04d} {s:.6f} {e:.6f} {text}\n"
                                    for k, (s, e, text) in enumerate(lines, 1)))
        length = max(end_of.values()) + 0.2
        if conv == "2030":  # the last segment ends 0.7 s past the audio: skipped
            length = max(end_of.values()) - 0.7
        if conv == "2029":  # 0.3 s past the end: kept (within extract-segments' 0.5 s)
            length = max(end_of.values()) - 0.3
        if conv != "2031":  # transcribed, no audio
            write_sphere(tree.swbd_audio / "swb1_d1" / "data" / f"sw0{conv}.sph",
                         np.zeros((int(length * RATE), 2), np.int16))
    write_sphere(tree.swbd_audio / "swb1_d2" / "data" / "sw04999.sph",  # no transcript
                 np.zeros((RATE, 2), np.int16))
    (tree.ms98 / "sw-ms98-dict.text").write_text(MS98_DICT)
    _prep_eval2000(tree)
    _prep_fisher(tree, np.random.default_rng(seed + 1))
    return tree


# eval2000 segments (start, end, stm words) per side: times whose %06d of t*100 truncates
# (1.13 -> 000112), a first segment within 0.1 s of the start, gaps under 0.2 s, an overlap,
# the stm's "((", asides, an IGNORE segment and a conversation without audio.
EVAL_PREP = {
    ("en_4156", "A"): [(0.05, 1.13, "HE IS A POLICE OFFICER"), (1.29, 2.01, "(%HESITATION) YEAH"),
                       (2.57, 4.35, "(( I THINK )) SO"), (4.35, 5.15, "OKAY"),
                       (8.19, 9.58, "IGNORE_TIME_SEGMENT_IN_SCORING")],
    ("en_4156", "B"): [(0.58, 2.03, "UH-HUH"), (1.98, 3.07, "<B_ASIDE> WAIT <E_ASIDE> RIGHT"),
                       (16.39, 17.21, "WE WENT TO (DAL-) DALLAS")],
    ("sw_4390", "A"): [(0.29, 0.57, "YEAH"), (1.15, 4.07, "I WORK AT I B M"),
                       (33.15, 37.21, "THAT'S (%HESITATION) TRUE")],
    ("sw_4390", "B"): [(2.03, 4.35, "UM-HUM"), (32.79, 33.15, "RIGHT")],
    ("en_6000", "A"): [(3.01, 4.07, "NO AUDIO FOR THIS ONE")],  # no .sph: dropped
}


def _prep_eval2000(tree: LdcTree) -> None:
    stm = [';; LABEL "O" "Overall" "Overall"', ';; LABEL "F" "Female" "Female speakers"',
           ';; LABEL "M" "Male" "Male speakers"']
    for (file, side), segs in EVAL_PREP.items():
        label = "<O,en,M,en-M>" if side == "A" else "<O,en,F,en-F>"
        stm += [f"{file} {side} {file}_{side} {s:.2f} {e:.2f} {label}  {text}"
                for s, e, text in segs]
    for file in ("en_4156", "sw_4390"):
        write_sphere(tree.eval2000_audio / "hub5e_00" / "english" / f"{file}.sph",
                     np.zeros((40 * RATE, 2), np.int16))
    _write_pem(tree.eval2000_audio / "hub5e_00" / "english" / "hub5e_00.pem", stm)
    ref = tree.eval2000_ref / "reference"
    ref.mkdir(parents=True)
    (ref / "hub5e00.english.000405.stm").write_text("\n".join(stm) + "\n")
    (ref / "en20000405_hub5.glm").write_text(EVAL_GLM)


# Fisher (fisher_swbd's local/fisher_data_prep.sh): calls per release, the conversation without
# audio, the audio without transcript; the sph folders Kaldi looks for (all must exist), one of
# them under the newer name fisher_eng_tr_sp_dN that the script also accepts.
FISHER_PREP = {"p1": ["00001", "00002", "00003", "00004"], "p2": ["05851", "05852", "05853"]}
FISHER_NO_AUDIO, FISHER_NO_TEXT = "05853", "05860"
FISHER_FILLERS = ["yeah", "uh-huh", "right", "yeah yeah", "yeah  yeah", "oh okay", "[laughter]",
                  "[laugh]", "i know", "um", "that's true", "really"]
# Once per call side, in order: "((" lines (dropped whole), every marker fisher_data_prep.sh maps
# and bracketed words it does not, markers inside words, case, inner whitespace kept, lines
# without words (not matched), partial words.
FISHER_SPECIAL = [
    "(( i don't know ))", "i was ((at the)) store", "(( ))", "[laugh] that is funny",
    "yeah [laughter] [laughter]", "[sigh] okay", "[cough] sorry about that",
    "[mn] [breath] well", "[lipsmack] so anyway", "[noise] hello", "oh[laugh] yeah",
    "[sneeze] excuse me", "[laugh", "[[laugh]] no", "I think T.V. is fine", "we watch t._v.",
    "so  what  do you", "tab\there too", "trailing spaces   ", "", "   ",
    "sto- stopped it", "-ing [mn]", "[breath]", "uh [Laugh] no", "[sigh] [sigh] [cough]",
    "((mm)) yeah", "Yeah RIGHT",
]
SURE_PER_SIDE = 25  # "sure": 300 lines over the 12 sides with audio (exactly remove_dup's 300)


def _fisher_lines(rng: np.random.Generator, texts: list[str], side: str
                  ) -> list[tuple[str, str, str]]:
    """(start, end, words) as the transcripts write them: two decimals, where %06d of t*100
    truncates often (0.29 -> 000028); a few with three decimals."""
    out, t = [], 0.5
    for k, text in enumerate(texts):
        start = t + rng.uniform(0.1, 0.8)
        end = start + 0.3 * max(1, len(text.split())) + rng.uniform(0.05, 0.5)
        fmt = "{:.3f}" if k % 40 == 7 else "{:.2f}"
        out.append((fmt.format(start), fmt.format(end), text))
        t = end
    return out


def _prep_fisher(tree: LdcTree, rng: np.random.Generator) -> None:
    specials = iter(FISHER_SPECIAL)
    for part, calls in FISHER_PREP.items():
        audio_root = tree.fisher_audio if part == "p1" else tree.fisher_audio2
        text_root = tree.fisher_text if part == "p1" else tree.fisher_text2
        for n in range(1, 8):
            name = f"fe_03_{part}_sph{n}" if (part, n) != ("p1", 3) else "fisher_eng_tr_sp_d3"
            (audio_root / name / "audio").mkdir(parents=True, exist_ok=True)
        for k, call in enumerate(calls):
            lines, end_of = [], {}
            for side in "AB":
                texts = ["mhm"] * 28 + list(rng.choice(FISHER_FILLERS, size=24))
                texts += [f"about call {call} {side} number {j}" for j in range(3)]
                if call != FISHER_NO_AUDIO:
                    texts += ["sure"] * SURE_PER_SIDE
                rng.shuffle(texts)
                for _ in range(2):
                    texts.insert(int(rng.integers(0, len(texts))), next(specials, "okay"))
                texts.append(f"bye now {call} {side}")  # the last: the one past the audio
                side_lines = _fisher_lines(rng, texts, side)
                if call == "00001" and side == "A":  # shorter than 0.1 s, start = end, one id
                    side_lines += [("300.00", "300.05", "oh"), ("301.10", "301.10", "hm"),
                                   ("302.00", "303.00", "we said this"),
                                   ("302.00", "303.00", "and that")]
                end_of[side] = max(float(e) for _, e, _ in side_lines)
                lines += [(s, e, side, w) for s, e, w in side_lines]
            length = max(end_of.values()) + 0.2
            if call == "00002":  # its last segment ends 0.7 s past the audio: skipped
                length -= 0.9
            if call == "05851":  # 0.3 s past the end: kept
                length -= 0.5
            lines.sort(key=lambda x: float(x[0]))
            body = "".join(f"{s} {e} {side}:{' ' if w else ''}{w}\n" for s, e, side, w in lines)
            txt = (text_root / f"fe_03_{part}_tran" / "data" / "trans" / call[:3]
                   / f"fe_03_{call}.txt")
            txt.parent.mkdir(parents=True, exist_ok=True)
            txt.write_text(f"# fe_03_{call}.sph\n# Transcribed at the LDC\n\n{body}")
            if call != FISHER_NO_AUDIO:
                sph_dir = "fisher_eng_tr_sp_d3" if call >= "00003" and part == "p1" else \
                    f"fe_03_{part}_sph{1 + k % 2}"
                write_sphere(audio_root / sph_dir / "audio" / call[:3] / f"fe_03_{call}.sph",
                             np.zeros((int(length * RATE), 2), np.int16))
        (text_root / f"fe_03_{part}_tran" / "doc").mkdir(parents=True, exist_ok=True)
    write_sphere(tree.fisher_audio2 / "fe_03_p2_sph2" / "audio" / "058" /
                 f"fe_03_{FISHER_NO_TEXT}.sph", np.zeros((RATE, 2), np.int16))
