"""sclite-compatible alignment: hand-checked cases, and exact agreement with NIST sclite."""

from __future__ import annotations

import random
import re
import subprocess
from pathlib import Path

import pytest

from asrdist.score.align_text import ErrorCounts, align_words, count_errors
from asrdist.score.score import score_hypotheses

SCLITE = Path("/usr/lib/sctk/bin/sclite")


def test_counts_of_hand_checked_cases():
    assert count_errors("a b c".split(), "a b c".split()) == ErrorCounts(3, 3, 0, 0, 0, 1, 0)
    assert count_errors("a b c".split(), []) == ErrorCounts(3, 0, 0, 3, 0, 1, 1)
    assert count_errors([], "x y".split()) == ErrorCounts(0, 0, 0, 0, 2, 1, 1)
    assert count_errors("a b c d".split(), "a x c d e".split()) == ErrorCounts(4, 3, 1, 0, 1, 1, 1)


def test_alignment_marks_each_side():
    pairs = align_words("a b c".split(), "a c d".split())
    assert pairs == [("a", "a"), ("b", None), ("c", "c"), (None, "d")]


def test_ties_are_broken_as_sclite_does():
    # Equal cost 19: sclite reports 4 sub + 1 del, not 1 sub + 3 del + 2 ins.
    c = count_errors("c c d c a b".split(), "a a a c c".split())
    assert (c.sub, c.dels, c.ins) == (4, 1, 0)


def _random_corpus(rng: random.Random, n: int) -> tuple[str, str, str]:
    """Reference, hypothesis and utt2spk texts with every kind of error and missing hyps."""
    vocab = "a b c d e".split()
    ref_lines, hyp_lines, spk_lines = [], [], []
    for i in range(n):
        spk = f"spk{i % 7}"
        utt = f"{spk}-utt{i:04d}"
        ref = [rng.choice(vocab) for _ in range(rng.randint(1, 12))]
        kind = i % 6
        if kind == 0:  # missing from the hypotheses
            hyp = None
        elif kind == 1:  # empty hypothesis
            hyp = []
        elif kind == 2:  # insertions
            hyp = list(ref)
            for _ in range(rng.randint(1, 3)):
                hyp.insert(rng.randint(0, len(hyp)), rng.choice(vocab))
        elif kind == 3:  # deletions
            hyp = [w for w in ref if rng.random() > 0.4]
        else:  # unrelated: substitutions and many equal-cost ties
            hyp = [rng.choice(vocab) for _ in range(rng.randint(0, 12))]
        ref_lines.append(f"{utt} {' '.join(ref)}\n")
        spk_lines.append(f"{utt} {spk}\n")
        if hyp is not None:
            hyp_lines.append(f"{utt} {' '.join(hyp)}\n".replace(" \n", "\n"))
    return "".join(ref_lines), "".join(hyp_lines), "".join(spk_lines)


def _sclite_rows(ref_trn: Path, hyp_trn: Path) -> dict[str, tuple[int, ...]]:
    """sclite's raw counts: speaker or Sum -> (Snt, Wrd, Corr, Sub, Del, Ins, Err, S.Err)."""
    out = subprocess.run(
        [str(SCLITE), "-r", str(ref_trn), "trn", "-h", str(hyp_trn), "trn",
         "-i", "rm", "-s", "-o", "rsum", "stdout"],
        capture_output=True, text=True, check=True,
    ).stdout
    rows = {}
    for line in out.splitlines():
        m = re.match(r"\s*\|\s*(\S+)\s*\|((?:\s*\d+){2})\s*\|((?:\s*\d+){6})\s*\|", line)
        if m:
            rows[m.group(1)] = tuple(int(v) for v in (m.group(2) + m.group(3)).split())
    return rows


def _as_row(c: ErrorCounts) -> tuple[int, ...]:
    return (c.sentences, c.ref_words, c.corr, c.sub, c.dels, c.ins, c.errors, c.sentence_errors)


@pytest.mark.skipif(not SCLITE.is_file(), reason="NIST sclite (Debian sctk) is not installed")
def test_agrees_exactly_with_sclite(tmp_path):
    ref, hyp, utt2spk = _random_corpus(random.Random(0), 420)
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "text").write_text(ref)
    (tmp_path / "data" / "utt2spk").write_text(utt2spk)
    (tmp_path / "hyp.txt").write_text(hyp)
    run = score_hypotheses(tmp_path / "data" / "text", tmp_path / "hyp.txt",
                           tmp_path / "score", subsets_by="spk")
    result = run.primary.result
    assert len(result.missing) == 70
    t = result.total
    assert t.ins > 0 and t.dels > 0 and t.sub > 0
    rows = _sclite_rows(tmp_path / "score" / "ref.trn", tmp_path / "score" / "hyp.trn")
    assert rows.pop("Sum") == _as_row(t)
    assert rows == {spk: _as_row(c) for spk, c in result.subsets.items()}
