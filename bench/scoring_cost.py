"""What scoring a decoding sweep of an eval2000-sized set costs (asrdist-score --stm --glm
--data, stage 5 of the swbd recipes), with a GLM of the real one's size and constructs.

Generated, seeded: an stm of eval2000's shape (40 conversations, 80 sides, 20 ``sw_`` and 20
``en_``, 4459 segments, ~43 k words, hesitations, fragments, optionally deletable words,
IGNORE_TIME_SEGMENT_IN_SCORING segments), a GLM of ~2,000 rules (hesitations, optional
deletions ``(%HESITATION)``, spelling and compound alternations ``{ A / B C }``, hyphen rules,
``@`` alternatives, multi-word sources, a ctm-only contraction section), a data dir
(segments, reco2file_and_channel) and a decode dir with one utterance-relative ctm per sweep
point (6 LM weights x 3 penalties): each word kept, substituted, deleted or preceded by an
insertion at rates that move with the sweep point, and a segment's hypothesis redrawn at a
point with probability ``--changed`` (the rest as at the sweep's first point), since the best
path of most utterances is the same across neighbouring points.

Timed: :func:`asrdist.score.hubscr.score_decode_dir` over the whole sweep (18 points, each the
set and both subsets), as stage 5 runs it; and, with ``--old-tree DIR`` (a checkout of an
older asrdist, e.g. ``git worktree add DIR main``), that tree's ``score_decode_dir`` over the
first ``--old-points`` points, in a subprocess, the rest extrapolated.

    .venv/bin/python -m bench.scoring_cost [--old-tree DIR] [--publish]
"""

from __future__ import annotations

import argparse
import random
import shutil
import tempfile
import time
from pathlib import Path

from asrdist.score.hubscr import score_decode_dir
from bench.harness import fresh_process
from bench.results import publish, publish_option

LMWTS = (6, 8, 10, 12, 14, 17)
WIPS = (0.0, 0.5, 1.0)
HESITATIONS = ("UH", "UM", "ER", "AH", "EH", "HM", "MM", "UHM", "ERM", "HMM")
SYLLABLES = ("BA", "KE", "LO", "MI", "TU", "RA", "SEN", "DOR", "VI", "PLA", "GRO", "NE", "STA",
             "CHI", "WON", "FEL", "MAR", "TIN", "SHO", "BLE", "QUA", "ZEL", "HAR", "PEN")


def _word(rng: random.Random) -> str:
    return "".join(rng.choice(SYLLABLES) for _ in range(rng.choice((1, 2, 2, 3))))


def make_glm(rng: random.Random, rules: int) -> tuple[str, list[str]]:
    """A hub5-like GLM of about ``rules`` rules, and the words its rules rewrite (to be put
    into the transcripts, so that the rules fire)."""
    lines = [";;", '* name "bench.glm"',
             '* desc "generated: the constructs of en20000405_hub5.glm"',
             "* format = 'NIST1'", f"* max_nrules = '{rules + 100}'", "* copy_no_hit = 'T'",
             "* case_sensitive = 'F'"]
    sources: list[str] = []
    lines += [f"[{h}] => [%HESITATION] / [ ] __ [ ]" for h in HESITATIONS]
    lines += [f"[{h}{h[-1]}] => [(%HESITATION)] / [ ] __ [ ]" for h in HESITATIONS]
    lines += ["[HUH] => [{HUH / @}] / [ ] __ [ ]", "[OKAY] => [{OKAY / OK}] / [ ] __ [ ]",
              "[ALL RIGHT] => [{ALRIGHT / ALL RIGHT}] / [ ] __ [ ]"]
    sources += ["HUH", "OKAY", "ALL RIGHT"]
    seen: set[str] = set()
    ctm_rules = rules // 4
    while len(sources) < rules - ctm_rules:
        a, b = _word(rng), _word(rng)
        kind = rng.random()
        if kind < 0.45:  # compound spelled as one word, two words or hyphenated
            source, target = a + b, f"{{{a}{b} / {a} {b} / {a}-{b}}}"
        elif kind < 0.65:  # hyphen rule
            source, target = f"{a}-{b}", f"{{{a}-{b} / {a} {b} / {a}{b}}}"
        elif kind < 0.8:  # a multi-word source
            source, target = f"{a} {b}", f"{{{a} {b} / {a}{b}}}"
        elif kind < 0.9:  # a spelling variant that may also be absent
            source, target = a, f"{{{a} / {b} / @}}"
        else:  # a variant
            source, target = a, f"{{{a} / {a}{b[0]}}}"
        if source in seen:
            continue
        seen.add(source)
        sources.append(source)
        lines.append(f"[{source}] => [{target}] / [ ] __ [ ]")
    lines.append(';;  INPUT_DEPENDENT_APPLICATION = "ctm"')
    for k in range(ctm_rules):  # contractions, as the hub5 GLM expands them in hypotheses
        a = _word(rng)
        tails = (("'M", "AM"), ("'D", "HAD / {a} WOULD"), ("'LL", "WILL"), ("'RE", "ARE"),
                 ("'VE", "HAVE"), ("N'T", " NOT"))
        tail, full = tails[k % len(tails)]
        source = a + tail
        if source in seen:
            continue
        seen.add(source)
        sources.append(source)
        lines.append(f"[{source}] => [{{{source} / {a} {full.format(a=a)}}}] / [ ] __ [ ]")
    return "\n".join(lines) + "\n", sources


def _ref_word(rng: random.Random, vocab: list[str], glm_words: list[str]) -> str:
    r = rng.random()
    if r < 0.04:
        return rng.choice(HESITATIONS).lower()
    if r < 0.05:
        return "(%hesitation)"
    if r < 0.06:
        return f"({rng.choice(vocab)[:3].lower()}-)"
    if r < 0.20:
        return rng.choice(glm_words).lower()
    return vocab[min(int(rng.paretovariate(1.1)) - 1, len(vocab) - 1)].lower()


def _hyp_words(rng: random.Random, ref: list[str], vocab: list[str], point: int) -> list[str]:
    """A hypothesis with ~25 % errors; deletions rise and insertions fall along the sweep."""
    dele, ins = 0.04 + 0.006 * point, 0.06 - 0.003 * point
    out = []
    for word in ref:
        word = word.strip("()")
        if rng.random() < ins:
            out.append(rng.choice(vocab).lower())
        r = rng.random()
        if r < dele:
            continue
        out.append(rng.choice(vocab).lower() if r < dele + 0.13 else word)
    return out


def make_sweep(root: Path, seed: int, changed: float, segments: int = 4459,
               rules: int = 2000) -> tuple[Path, Path, Path, Path, int]:
    """stm, glm, data dir and decode dir under ``root``; returns them and the word count."""
    rng = random.Random(seed)
    glm_text, glm_words = make_glm(rng, rules)
    vocab = sorted({_word(rng) for _ in range(8000)})
    rng.shuffle(vocab)
    sides = [(f"{'sw' if c < 20 else 'en'}_{4000 + c}", ch) for c in range(40) for ch in "AB"]
    per_side = [segments // len(sides) + (k < segments % len(sides)) for k in range(len(sides))]
    stm, seg_lines, reco, refs = [';; LABEL "O" "Overall" "Overall"'], [], [], []
    words = 0
    for (file, chan), count in zip(sides, per_side, strict=True):
        reco_id = f"{file}-{chan}"
        reco.append(f"{reco_id} {file} {chan}")
        t = rng.uniform(0.0, 2.0)
        for k in range(count):
            n = max(1, min(60, int(rng.expovariate(1 / 9.1)) + 1))
            text = [_ref_word(rng, vocab, glm_words) for _ in range(n)]
            if rng.random() < 0.01:
                text = ["IGNORE_TIME_SEGMENT_IN_SCORING"]
            dur = 0.3 * n + rng.uniform(0.2, 1.0)
            stm.append(f"{file} {chan} {file}_{chan} {t:.2f} {t + dur:.2f} <O> {' '.join(text)}")
            utt = f"{reco_id}_{k:05d}"
            seg_lines.append(f"{utt} {reco_id} {t:.2f} {t + dur:.2f}")
            refs.append((utt, text, dur))
            words += len(text)
            t += dur + rng.uniform(0.1, 3.0)
    glm, stm_path = root / "bench.glm", root / "ref.stm"
    glm.write_text(glm_text)
    stm_path.write_text("\n".join(stm) + "\n")
    data, decode = root / "eval2000", root / "decode"
    data.mkdir()
    (data / "segments").write_text("\n".join(seg_lines) + "\n")
    (data / "reco2file_and_channel").write_text("\n".join(reco) + "\n")
    base = [_hyp_words(rng, text, vocab, 0) for _, text, _ in refs]
    for point, (lmwt, wip) in enumerate((lmwt, wip) for lmwt in LMWTS for wip in WIPS):
        lines = []
        for (utt, text, dur), first in zip(refs, base, strict=True):
            hyp = first if rng.random() >= changed else _hyp_words(rng, text, vocab, point)
            step = dur / max(1, len(hyp))
            lines += [f"{utt} 1 {i * step:.2f} {step * 0.8:.2f} {w}" for i, w in enumerate(hyp)]
        out = decode / f"score_{lmwt}_{wip:.1f}"
        out.mkdir(parents=True)
        (out / "ctm").write_text("\n".join(lines) + "\n")
    return stm_path, glm, data, decode, words


_OLD = """
import json, sys, time
from pathlib import Path
try:
    from asrdist.score.hubscr import score_decode_dir
except ImportError:  # a tree from before scoring left asrdist.decode
    from asrdist.decode.hubscr import score_decode_dir
stm, glm, decode, data, points = sys.argv[1:6]
keep = sorted(Path(decode).glob("score_*"))[:int(points)]
for d in sorted(Path(decode).glob("score_*")):
    if d not in keep:
        (d / "ctm").rename(d / "ctm.skipped")
t, c = time.perf_counter(), time.process_time()
lines = score_decode_dir(stm, glm, decode, data)
print(json.dumps([time.perf_counter() - t, time.process_time() - c, lines]))
for d in sorted(Path(decode).glob("score_*")):
    if (d / "ctm.skipped").exists():
        (d / "ctm.skipped").rename(d / "ctm")
"""


def time_old(tree: Path, stm: Path, glm: Path, decode: Path, data: Path,
             points: int) -> tuple[float, float, list[str]]:
    """Wall and CPU seconds ``tree``'s score_decode_dir takes over the first ``points`` sweep
    points, and the lines it prints."""
    wall, cpu, lines = fresh_process(_OLD, stm, glm, decode, data, points, tree=tree)
    return wall, cpu, lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--segments", type=int, default=4459)
    ap.add_argument("--rules", type=int, default=2000)
    ap.add_argument("--changed", type=float, nargs="+", default=[0.3, 1.0],
                    help="fractions of segments whose hypothesis is redrawn at each point")
    ap.add_argument("--old-tree", type=Path, default=None)
    ap.add_argument("--old-points", type=int, default=1)
    publish_option(ap, __file__)
    args = ap.parse_args()
    rows = []
    for changed in args.changed:
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp)
            stm, glm, data, decode, words = make_sweep(root, args.seed, changed, args.segments,
                                                       args.rules)
            t, c = time.perf_counter(), time.process_time()
            lines = score_decode_dir(stm, glm, decode, data)
            new = time.perf_counter() - t, time.process_time() - c
            points = len(LMWTS) * len(WIPS)
            old = None
            if args.old_tree is not None and changed == args.changed[0]:
                for d in decode.glob("score_*"):
                    for f in d.iterdir():
                        if f.name != "ctm":
                            f.unlink()
                old = time_old(args.old_tree, stm, glm, decode, data, args.old_points)
            best = [line.split()[2] for line in lines if line.startswith("best:")]
            same = None if old is None else all(
                line in lines for line in old[2] if not line.startswith("best:"))
            rows.append((changed, words, points, new, old, best, same))
            shutil.rmtree(root, ignore_errors=True)
    lines_out = [
        "## Scoring an eval2000-sized sweep (asrdist-score --stm --glm --data)", "",
        "Command: `.venv/bin/python -m bench.scoring_cost"
        + (" --old-tree OLD" if args.old_tree else "")
        + f" --publish` (seed {args.seed}; OLD: a checkout of the code before"
        " the change). Generated eval2000-shaped input: 80 sides, "
        f"{args.segments} segments, a {args.rules}-rule GLM with the hub5 GLM's constructs;"
        " each sweep point scored for the set and both subsets, as stage 5 does"
        " (`score_decode_dir`: ctm made recording-relative, filtered, scored). 2 shared cores;"
        " other jobs ran beside it.", "",
        "| hypotheses redrawn per point | ref words | points | new: whole sweep, wall / CPU (s) "
        "| old: whole sweep, wall / CPU (s) | old's lines = new's | best %WER (set, swbd, "
        "callhm) |", "|---|---|---|---|---|---|---|"]
    for changed, words, points, new, old, best, same in rows:
        scale = points / args.old_points
        old_cell = "-" if old is None else (
            f"{old[0] * scale:.0f} / {old[1] * scale:.0f} (measured {old[0]:.0f} / "
            f"{old[1]:.0f} s for {args.old_points} point{'s' if args.old_points > 1 else ''},"
            f" x{scale:g})")
        same_cell = "-" if same is None else "yes" if same else "NO"
        lines_out.append(f"| {changed:.0%} | {words} | {points} | {new[0]:.0f} / {new[1]:.0f} | "
                         f"{old_cell} | {same_cell} | "
                         f"{', '.join(best)} |")
    publish(lines_out, args.publish)


if __name__ == "__main__":
    main()
