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
from tests.corpus.sphere_writer import write_sphere

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
    """Speak each line after a pause; returns the channel's samples and (start, end, text)."""
    pieces, times, t = [], [], 0.0
    for text in lines:
        gap = np.zeros(int(rng.uniform(0.2, 0.5) * RATE))
        said = _spoken(text)
        speech = (synthesize(said, voice, rate=190, sample_rate=RATE) * 0.5 if said
                  else np.zeros(int(0.6 * RATE)))
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
    stm = [';; LABEL "O" "Overall" "Overall"', ';; LABEL "F" "Female" "Female speakers"',
           ';; LABEL "M" "Male" "Male speakers"']
    for file in ("sw_4390", "en_4156"):
        audio, times = _conversation({s: EVAL[(file, s)] for s in "AB"}, rng)
        write_sphere(tree.eval2000_audio / "hub5e_00" / "english" / f"{file}.sph", audio)
        for side, segs in times.items():
            label = "<O,M>" if side == "A" else "<O,F>"
            stm += [f"{file} {side} {file}_{side} {s:.2f} {e:.2f} {label} {text}"
                    for s, e, text in segs]
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
