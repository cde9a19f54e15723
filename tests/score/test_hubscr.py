"""asrdist-score hubscr (stm, glm, ctm) side by side with NIST hubscr.pl from Debian's sctk."""

from __future__ import annotations

import random
import shutil
import subprocess
from pathlib import Path

import pytest

from asrdist.score.glm import filter_text, read_glm
from asrdist.score.hubscr import score_stm_glm_ctm, words_equal
from tests.cli_process import run_cli

SCTK = Path("/usr/lib/sctk/bin")

GLM = """;;
* name "test.glm"
* desc "hub5-like rules: hesitations, contractions, spelling variants"
* format = 'NIST1'
* max_nrules = '100'
* copy_no_hit = 'T'
* case_sensitive = 'F'
[UH] => [%HESITATION] / [ ] __ [ ]
[UM] => [%HESITATION] / [ ] __ [ ]
[ER] => [%HESITATION] / [ ] __ [ ]
[OKAY] => [{OKAY / OK}] / [ ] __ [ ]
[ALRIGHT] => [{ALRIGHT / ALL RIGHT}] / [ ] __ [ ]
[HUH] => [{HUH / @}] / [ ] __ [ ]
;;  INPUT_DEPENDENT_APPLICATION = "ctm"
[I'M] => [{I'M / I AM}] / [ ] __ [ ]
[GONNA] => [{GONNA / GOING TO}] / [ ] __ [ ]
[THEY'RE] => [{THEY'RE / THEY ARE}] / [ ] __ [ ]
"""

REF_WORDS = ["i", "am", "going", "to", "the", "dallas", "they", "are", "okay", "yeah", "right",
             "uh-huh", "all", "right", "so", "um", "uh", "(%hesitation)", "(dal-)", "(th-)",
             "(-ing)", "alright", "know", "you", "huh"]
HYP_WORDS = ["i'm", "i", "am", "gonna", "going", "to", "the", "dallas", "they're", "they", "okay",
             "ok", "yeah", "right", "uh-huh", "uh", "huh", "all", "alright", "so", "know",
             "you", "dal", "thing", "sing", "%hesitation", "(so)"]


def _random_set(seed: int, files: int = 4) -> tuple[str, str]:
    """An stm and a ctm with every feature the scoring must get right, drawn at random."""
    rng = random.Random(seed)
    stm = [';; LABEL "O" "Overall" "Overall"']
    ctm = []
    for f in range(files):
        file = f"{'sw' if f % 2 else 'en'}_{4000 + f}"
        for chan in "AB":
            t = rng.uniform(0.0, 1.0)
            for _ in range(rng.randint(1, 6)):
                dur = rng.uniform(0.5, 4.0)
                kind = rng.random()
                if kind < 0.08:
                    text = "IGNORE_TIME_SEGMENT_IN_SCORING"
                elif kind < 0.14:
                    text = ""
                else:
                    text = " ".join(rng.choice(REF_WORDS) for _ in range(rng.randint(1, 8)))
                stm.append(f"{file} {chan} {file}_{chan} {t:.2f} {t + dur:.2f} <O> {text}")
                # hypothesis words, some before, between and after the segments
                h = t - 0.3
                while h < t + dur + 0.4:
                    if rng.random() < 0.8:
                        word = rng.choice(HYP_WORDS)
                        ctm.append(f"{file} {chan} {h:.2f} 0.20 {word}")
                    h += rng.uniform(0.15, 0.6)
                t += dur + rng.choice([0.0, 0.3, 1.0])
    rng.shuffle(ctm)  # hubscr.pl sorts; so must we
    return "\n".join(stm) + "\n", "\n".join(ctm) + "\n"


def _hubscr(tmp: Path, stm: Path, glm: Path, ctm: Path) -> list[str]:
    """hubscr.pl's Sum/Avg rows for the set and for Kaldi's two subsets (grep -v on both)."""
    rows = []
    for name, drop in (("all", None), ("swbd", "en_"), ("callhm", "sw_")):
        d = tmp / f"nist_{name}"
        d.mkdir()
        for src in (stm, ctm):
            lines = src.read_text().splitlines(keepends=True)
            (d / src.name).write_text("".join(
                line for line in lines if drop is None or not line.startswith(drop)))
        env = {"PATH": f"{SCTK}:/usr/bin:/bin"}
        proc = subprocess.run(
            [str(SCTK / "hubscr.pl"), "-p", str(SCTK), "-V", "-l", "english", "-h", "hub5",
             "-g", str(glm), "-r", str(d / stm.name), str(d / ctm.name)],
            capture_output=True, text=True, env=env, cwd=d)
        assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
        sys_text = (d / f"{ctm.name}.filt.sys").read_text()
        row = next(line for line in sys_text.splitlines() if "Sum/Avg" in line)
        rows.append(" ".join(row.replace("|", " ").split()[1:]))
    return rows


def _ours(lines: list[str]) -> list[str]:
    return [" ".join(line.split("|")[1].split() + line.split("|")[2].split()) for line in lines]


needs_sctk = pytest.mark.skipif(not (SCTK / "hubscr.pl").is_file() or not shutil.which("perl"),
                                reason="Debian's sctk (hubscr.pl) is not installed")


@needs_sctk
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_agrees_exactly_with_hubscr(tmp_path, seed):
    stm_text, ctm_text = _random_set(seed)
    stm, glm, ctm = tmp_path / "ref.stm", tmp_path / "en.glm", tmp_path / "hyp.ctm"
    stm.write_text(stm_text)
    glm.write_text(GLM)
    ctm.write_text(ctm_text)
    expected = _hubscr(tmp_path, stm, glm, ctm)
    lines = score_stm_glm_ctm(stm, glm, ctm)
    assert _ours(lines) == [" ".join(r.split()[:2] + r.split()[2:]) for r in expected]
    assert lines[0].startswith(f"%WER {expected[0].split()[6]} | ")
    assert lines[0].endswith(f"| {ctm}.filt.sys")


@needs_sctk
def test_cli_prints_kaldi_lines_for_set_and_subsets(tmp_path):
    stm_text, ctm_text = _random_set(7)
    stm, glm, ctm = tmp_path / "ref.stm", tmp_path / "en.glm", tmp_path / "hyp.ctm"
    stm.write_text(stm_text)
    glm.write_text(GLM)
    ctm.write_text(ctm_text)
    proc = run_cli("score", "hubscr", "--stm", stm, "--glm", glm, ctm)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout.splitlines()
    assert [line.rsplit("|", 1)[1].strip() for line in out] == [
        f"{ctm}.filt.sys", f"{ctm}.swbd.filt.sys", f"{ctm}.callhm.filt.sys"]
    expected = _hubscr(tmp_path, stm, glm, ctm)
    assert [" ".join(line.split("|")[1].split() + line.split("|")[2].split())
            for line in out] == expected


def test_glm_filter_maps_hesitations_alternatives_hyphens_and_optional_words(tmp_path):
    glm = tmp_path / "en.glm"
    glm.write_text(GLM)
    ref_rules, hyp_rules = read_glm(glm, "stm", "ref"), read_glm(glm, "ctm", "hyp")
    assert filter_text("i'm uh (going to) okay uh-huh", ref_rules, pad=" ") == (
        "I'M %HESITATION (GOING) (TO) {OKAY / OK} UH HUH")  # rules run before -dh
    assert filter_text("i'm", hyp_rules) == "{I'M / I AM}"
    assert words_equal("(DAL-)", "DALLAS") and words_equal("-ING", "SING")
    assert not words_equal("(DAL-)", "DA") and not words_equal("THE", "THEY")


def test_missing_stm_names_the_option(tmp_path):
    (tmp_path / "en.glm").write_text(GLM)
    (tmp_path / "hyp.ctm").write_text("sw_1 A 0.1 0.2 hi\n")
    proc = run_cli("score", "hubscr", "--stm", tmp_path / "none.stm", "--glm", tmp_path / "en.glm",
                   tmp_path / "hyp.ctm")
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines()[-1].startswith("Error: --stm ")


def test_empty_ctm_is_refused_naming_it(tmp_path):
    """hubscr.pl scores an empty CTM as all deletions, which optional words make a plausible
    80 % here; a decode that wrote no words is an error instead."""
    stm_text, _ = _random_set(3)
    stm, glm, ctm = tmp_path / "ref.stm", tmp_path / "en.glm", tmp_path / "hyp.ctm"
    stm.write_text(stm_text)
    glm.write_text(GLM)
    ctm.write_text(";; a comment, no words\n")
    proc = run_cli("score", "hubscr", "--stm", stm, "--glm", glm, ctm)
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines()[-1] == (
        f"Error: {ctm}: empty CTM, no hypothesis word to score (did decoding fail, or write no "
        "word timings: a graph without phones/align_lexicon.int?)")
    assert not list(tmp_path.glob("*.sys"))
