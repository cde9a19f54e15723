"""GLM filtering with many rules that compete for the same text, side by side with NIST's
csrfilt.sh (Debian's sctk) as hubscr.pl runs it on an stm."""

from __future__ import annotations

import random
import subprocess

import pytest

from asrdist.score.glm import read_glm
from asrdist.score.hubscr import read_stm
from tests.score.test_hubscr import SCTK, needs_sctk

# words that are prefixes, suffixes and parts of each other, so that rules collide
POOL = ["a", "ab", "abc", "b", "ba", "cat", "cats", "uh", "um", "ok", "x-ray", "all", "right",
        "go", "going", "to", "gonna", "i'm", "(uh)", "tho-", "-ing"]


def _glm(rng: random.Random, rules: int) -> str:
    """Rules in the hub5 GLM's form (``/ [ ] __ [ ]``), one- and two-word sources, words that
    begin others, alternations (with ``@``), optional deletions and hyphens, a ctm-only
    section; later rules are
    often shadowed by earlier ones."""
    lines = [";;", '* name "collide.glm"', "* format = 'NIST1'", f"* max_nrules = '{rules + 10}'",
             "* copy_no_hit = 'T'", "* case_sensitive = 'F'"]
    words = [w.upper() for w in POOL if not w.startswith(("(", "-")) and not w.endswith("-")]
    for k in range(rules):
        if k == rules * 3 // 4:
            lines.append(';;  INPUT_DEPENDENT_APPLICATION = "ctm"')
        shape = rng.random()
        if shape < 0.6:
            source = rng.choice(words)
        else:
            source = f"{rng.choice(words)} {rng.choice(words)}"
        target = rng.choice([
            rng.choice(words), f"{{{rng.choice(words)} / {rng.choice(words)} {rng.choice(words)}}}",
            f"{{{rng.choice(words)} / @}}", f"({rng.choice(words)})", "%HESITATION",
            f"{rng.choice(words)}-{rng.choice(words)}"])
        lines.append(f"[{source}] => [{target}] / [ ] __ [ ]")
    return "\n".join(lines) + "\n"


def _stm(rng: random.Random) -> str:
    lines = []
    for file in ("sw_4001", "en_4002"):
        for chan in "AB":
            for k in range(10):
                words = " ".join(rng.choice(POOL) for _ in range(rng.randint(1, 12)))
                lines.append(f"{file} {chan} {file}_{chan} {4 * k:.2f} {4 * k + 3:.2f} <O> {words}")
    return "\n".join(lines) + "\n"


@needs_sctk
@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_colliding_rules_filter_an_stm_as_csrfilt(tmp_path, seed):
    rng = random.Random(seed)
    stm, glm = tmp_path / "ref.stm", tmp_path / "collide.glm"
    glm.write_text(_glm(rng, 300))
    stm.write_text(_stm(rng))
    with open(stm) as f:  # hubscr.pl's call for the reference of -h hub5
        proc = subprocess.run([str(SCTK / "csrfilt.sh"), "-i", "stm", "-t", "ref", "-dh",
                               str(glm)], stdin=f, capture_output=True, text=True,
                              env={"PATH": f"{SCTK}:/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stderr
    theirs = {tuple(line.split()[:5]): " ".join(line.split()[6:])
              for line in proc.stdout.splitlines()}
    ours = {(s.file, s.chan, f"{s.file}_{s.chan}", f"{s.t1:.2f}", f"{s.t2:.2f}"): s.text
            for s in read_stm(stm, read_glm(glm, "stm", "ref"))}
    assert ours == theirs
