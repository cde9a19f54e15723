"""Human-readable scoring output: sclite-style subset tables and the markdown results file.

The results file (e.g. exp/results.md) collects every scored system of a recipe, like a Kaldi
RESULTS file, each with the commands that produced it. Its content is kept in a JSON sidecar
(results.json beside it) so that re-scoring one system replaces that system's entry only.
"""

from __future__ import annotations

import dataclasses
import fcntl
import json
import os
from pathlib import Path

from asrdist.fsutil import atomic_write, open_output
from asrdist.score.align_text import ErrorCounts
from asrdist.score.score import Scored, ScoringRun, wer_line

_COLUMNS = ("Subset", "#Snt", "#Wrd", "Corr", "Sub", "Del", "Ins", "Err", "S.Err", "%WER")


def _row(name: str, c: ErrorCounts) -> list[str]:
    return [
        name, str(c.sentences), str(c.ref_words), str(c.corr), str(c.sub), str(c.dels),
        str(c.ins), str(c.errors), str(c.sentence_errors), f"{c.wer:.2f}",
    ]


def _rows(scored: Scored) -> list[list[str]]:
    rows = [_row(name, counts) for name, counts in scored.result.subsets.items()]
    rows.append(_row("Sum", scored.result.total))
    return rows


def subset_table(scored: Scored) -> str:
    """Plain-text table of counts per subset and the sum (sclite's rsum, plus %WER)."""
    rows = [list(_COLUMNS), *_rows(scored)]
    widths = [max(len(r[i]) for r in rows) for i in range(len(_COLUMNS))]
    lines = []
    for r in rows:
        cells = [r[0].ljust(widths[0])]
        cells += [v.rjust(w) for v, w in zip(r[1:], widths[1:], strict=True)]
        lines.append("  ".join(cells))
    return "\n".join(lines) + "\n"


def markdown_table(scored: Scored) -> str:
    """The same table as markdown."""
    lines = ["| " + " | ".join(_COLUMNS) + " |", "|" + "---|" * len(_COLUMNS)]
    lines += ["| " + " | ".join(r) + " |" for r in _rows(scored)]
    return "\n".join(lines) + "\n"


def logged_commands(decode_dir: str | os.PathLike) -> list[str]:
    """Command lines recorded as the first ``# ...`` line of each log (Kaldi's convention),
    pipeline order first (graph, then decoding)."""
    out = []
    logs = sorted(Path(decode_dir).glob("log/*.log"),
                  key=lambda p: ("mkgraph" not in p.name, "decode" not in p.name, p.name))
    for log_file in logs:
        with open(log_file, encoding="utf-8") as f:
            first = f.readline().strip()
        if first.startswith("# "):
            out.append(first[2:])
    return out


def _entry(run: ScoringRun, commands: list[str]) -> dict:
    def scored(s: Scored | None) -> dict | None:
        if s is None:
            return None
        return {
            "name": s.name,
            "hyp_text": str(s.hyp_text),
            "total": dataclasses.asdict(s.result.total),
            "subsets": {k: dataclasses.asdict(v) for k, v in s.result.subsets.items()},
            "missing": len(s.result.missing),
            "wer_line": wer_line(s.result.total),
            "markdown_table": markdown_table(s),
        }

    return {
        "ref_text": str(run.ref_text),
        "main": scored(run.main),
        "best": scored(run.best),
        "variants": {s.name: wer_line(s.result.total) for s in run.variants},
        "commands": commands,
    }


def _render(entries: dict[str, dict]) -> str:
    out = ["# Results", "", "Word error rates as Kaldi prints them; counts as NIST sclite "
           "counts them (ref.trn/hyp.trn beside each decode dir score with "
           "`sclite -r ref.trn trn -h hyp.trn trn -i rm`).", ""]
    out += ["| System | Scored | %WER | Errors / Words | Ins | Del | Sub | Missing hyps |",
            "|---|---|---|---|---|---|---|---|"]
    for key, e in entries.items():
        for label in ("main", "best"):
            s = e[label]
            if s is None:
                continue
            t = s["total"]
            what = "fixed acwt" if label == "main" else f"best of sweep ({s['name']})"
            errors = t["sub"] + t["dels"] + t["ins"]
            wer = 100.0 * errors / t["ref_words"] if t["ref_words"] else 0.0
            out.append(f"| {key} | {what} | {wer:.2f} | {errors} / {t['ref_words']} | "
                       f"{t['ins']} | {t['dels']} | {t['sub']} | {s['missing']} |")
    for key, e in entries.items():
        out += ["", f"## {key}", "", f"Reference: `{e['ref_text']}`", ""]
        for label in ("main", "best"):
            s = e[label]
            if s is None:
                continue
            title = "Hypotheses" if label == "main" else f"Best of the sweep: `{s['name']}`"
            out += [f"{title}: `{s['hyp_text']}`", "", "```", s["wer_line"], "```", "",
                    s["markdown_table"]]
        if e["variants"]:
            out += ["Sweep:", "", "```"]
            out += [f"{line} {name}" for name, line in e["variants"].items()]
            out += ["```", ""]
        if e["commands"]:
            out += ["Commands:", "", "```"] + e["commands"] + ["```"]
    return "\n".join(out) + "\n"


def update_results(report_md: str | os.PathLike, key: str, run: ScoringRun,
                   commands: list[str]) -> None:
    """Put ``run`` under ``key`` in the results file (replacing an older entry) and rewrite it."""
    report_md = Path(report_md)
    report_md.parent.mkdir(parents=True, exist_ok=True)
    sidecar = report_md.with_suffix(".json")
    with open_output(report_md.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        entries = json.loads(sidecar.read_text()) if sidecar.is_file() else {}
        entries[key] = _entry(run, commands)
        with atomic_write(sidecar) as f:
            json.dump(entries, f, indent=1)
        with atomic_write(report_md) as f:
            f.write(_render(entries))
