"""The 39-point sweep's CPU with the compiled best paths (asrdist.decode.lattice._native.
best_paths) against the Python per point, on the same lattices (issue 32: the Python sweep,
run twice in pass + sweep + rescoring, cost more than the compiled lattice pass).

The lattices: ``--lattices`` (lat.N.gz archives, with their ``--data`` dir), else the mini
recipe's test set decoded once here (recipes/mini: data/test_mfcc scored by exp/mono/final.mdl
over exp/graph, one pass, no sweep). Each figure is a fresh process running ``write_readings``
(texts and CTMs at s5c's 39 points, what asrdist-decode's sweep writes; the archive read
included) with the compiled module, or with it hidden (the Python path); the two alternate,
``--reps`` times each, as the machine is shared. Their texts and CTMs must be the same bytes.

    .venv/bin/python -m bench.sweep_cost [--reps 2] [--lattices lat.1.gz ... --data DIR]
        [--mini recipes/mini] [--publish]
"""

from __future__ import annotations

import argparse
import filecmp
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from bench.results import REPO, publish, publish_option

_READINGS = """
import json, sys, time
if sys.argv[1] == "python":
    sys.modules["asrdist.decode.lattice._native"] = None
from asrdist.decode.decode_dir import S5C_LMWTS, S5C_WIPS
from asrdist.decode.lattice_readings import write_readings
from asrdist.decode.lmrescore import iter_lattice_archive
_, out, data, words, mdl, lexicon, *lats = sys.argv[1:]
t = time.process_time()
lattices = (pair for lat in lats for pair in iter_lattice_archive(lat))
write_readings(out, lattices, data, words, mdl, lexicon, S5C_LMWTS, S5C_WIPS)
print(json.dumps({"cpu": time.process_time() - t}))
"""


def readings(mode: str, out: Path, data: Path, graph: Path, mdl: Path, lats: list[Path]
             ) -> float:
    """CPU seconds of one fresh process's write_readings, the compiled sweep or the Python."""
    proc = subprocess.run([sys.executable, "-c", _READINGS, mode, str(out), str(data),
                           str(graph / "words.txt"), str(mdl),
                           str(graph / "phones/align_lexicon.int"), *map(str, lats)],
                          cwd=REPO, capture_output=True, text=True, check=False)
    if proc.returncode:
        raise SystemExit(f"write_readings ({mode}) failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.splitlines()[-1])["cpu"]


def same_outputs(a: Path, b: Path) -> bool:
    """Every file under ``a`` has the same bytes under ``b``, and no other file is there."""
    files = sorted(p.relative_to(a) for p in a.rglob("*") if p.is_file())
    return files == sorted(p.relative_to(b) for p in b.rglob("*") if p.is_file()) and all(
        filecmp.cmp(a / f, b / f, shallow=False) for f in files)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lattices", type=Path, nargs="*", default=[])
    ap.add_argument("--data", type=Path, help="the lattices' data dir (with --lattices)")
    ap.add_argument("--mini", type=Path, default=REPO / "recipes" / "mini")
    ap.add_argument("--reps", type=int, default=2)
    publish_option(ap, __file__)
    args = ap.parse_args()
    if args.reps < 1:
        raise SystemExit(f"--reps {args.reps}: must be at least 1")
    if args.lattices and args.data is None:
        raise SystemExit("--lattices needs --data, their data dir")
    graph, mdl = args.mini / "exp/graph", args.mini / "exp/mono/final.mdl"
    for need in (graph / "HCLG.fst", mdl, args.mini / "data/test_mfcc/feats.scp"):
        if not need.exists():
            raise SystemExit(f"{need}: missing (build the mini recipe through its graph)")
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        lats, data = args.lattices, args.data
        if not lats:
            from asrdist.decode.decode_dir import decode_data_dir

            data = args.mini / "data/test_mfcc"
            decode_data_dir(graph, data, work / "one", gmm=str(mdl), lmwts=(), wips=(0.0,))
            lats = sorted((work / "one").glob("lat.*.gz"))
        cpu: dict[str, list[float]] = {"python": [], "compiled": []}
        for rep in range(args.reps):
            for mode in cpu:
                cpu[mode].append(readings(mode, work / f"{mode}.{rep}", data, graph, mdl, lats))
        same = same_outputs(work / "python.0", work / "compiled.0")
        utts = len((work / "compiled.0" / "text").read_text().splitlines())
    py, co = min(cpu["python"]), min(cpu["compiled"])
    lines = [
        "## The 39-point sweep, compiled against the Python",
        "",
        f"`.venv/bin/python -m bench.sweep_cost --reps {args.reps}`"
        + (" (--lattices given)" if args.lattices else ""),
        "",
        f"- {utts} utterances' lattices ({'given' if args.lattices else 'the mini test set'}"
        f"), write_readings at s5c's 39 points (texts, CTMs, archive read), fresh processes, "
        f"CPU seconds per run: Python {', '.join(f'{c:.2f}' for c in cpu['python'])}; "
        f"compiled {', '.join(f'{c:.2f}' for c in cpu['compiled'])}.",
        f"- Best of each: Python {py:.2f} s, compiled {co:.2f} s: **{py / co:.1f}x** less CPU.",
        f"- Texts and CTMs the same bytes: {same}.",
    ]
    publish(lines, args.publish)
    if not same:
        raise SystemExit("the compiled sweep's readings differ from the Python's")


if __name__ == "__main__":
    main()
