"""Peak memory of a sequence learner's denominator lattices as the corpus grows.

Generates denominator lattice dirs (``lat.N.gz``, Kaldi binary CompactLattice archives written
by asrdist's own writer, ``num_jobs``) of 1x and 4x a base number of utterances and the
utterances' frame counts, then, in a process of its own per case, builds
:class:`~asrdist.train.sequence_data.DenominatorLattices` of every utterance and reads every
lattice back once; the table has that process's peak resident memory (VmHWM) and times.
With ``--compare REF`` the same lattices are also read by the code of git revision REF
(extracted with ``git archive``): before the spilled store, the lattices' arrays in a dict.

The lattices are :func:`asrdist.testing.denlats.denominator_lattice`'s, ``--width`` words
competing at every frame (a learner's share of a lattice grows with width x frames), 100..599
frames per utterance with Switchboard-like ids. Each process's TMPDIR is a fresh dir under
``--dir``, where the store spills; it must be empty afterwards.

    .venv/bin/python -m bench.sequence_memory --dir DIR [--base-utts 2000] [--scales 1 4]
        [--nj 8] [--width 20] [--compare REF] [--publish]
"""

from __future__ import annotations

import argparse
import tempfile
import tracemalloc
from pathlib import Path

import numpy as np

from asrdist.decode.lattice_io import write_lattices
from asrdist.testing.denlats import denominator_lattice
from bench.harness import compared_trees, fresh_process, generated_once
from bench.ingest_memory import utterance_ids
from bench.results import publish, publish_option

NUM_TIDS = 10_000
SWB_SP_FRAMES = 2.2e9  # Switchboard 2000 h with 3-way speed perturbation

SECTION = "## Denominator lattices: a sequence learner's memory against corpus size"

# Build the store of every utterance, read each lattice once; VmHWM, VmRSS (KiB), seconds to
# build and to read, and the bytes of the arrays read.
CODE = """
import json, sys, time
from asrdist.train.sequence_data import DenominatorLattices
wanted = {u: int(n) for u, n in (line.split() for line in open(sys.argv[2]))}
t0 = time.perf_counter()
lattices = DenominatorLattices(sys.argv[1], wanted)
t1 = time.perf_counter()
nbytes = 0
for utt in wanted:
    lat = lattices.get(utt)
    nbytes += sum(v.nbytes for v in vars(lat).values() if hasattr(v, "nbytes"))
t2 = time.perf_counter()
status = dict(line.split(":", 1) for line in open("/proc/self/status"))
print(json.dumps([int(status["VmHWM"].split()[0]), int(status["VmRSS"].split()[0]),
                  t1 - t0, t2 - t1, nbytes]))
"""


def generate(root: Path, num_utts: int, nj: int, width: int, seed: int = 0) -> int:
    """Write root/denlats (lat.N.gz, num_jobs) and root/utt2num_frames; the frames."""
    rng = np.random.default_rng(seed)
    lat_dir = root / "denlats"
    lat_dir.mkdir(parents=True)
    (lat_dir / "num_jobs").write_text(f"{nj}\n")
    utts = utterance_ids(num_utts)
    frames = rng.integers(100, 600, num_utts).tolist()
    (root / "utt2num_frames").write_text("".join(f"{u} {n}\n"
                                                 for u, n in zip(utts, frames, strict=True)))
    bounds = np.linspace(0, num_utts, nj + 1).round().astype(int)
    for job in range(nj):
        write_lattices(lat_dir / f"lat.{job + 1}.gz",
                       ((utts[i], denominator_lattice(rng, frames[i], width, NUM_TIDS))
                        for i in range(bounds[job], bounds[job + 1])))
    return sum(frames)


def measure(tree: Path, root: Path) -> tuple[float, float, float, float, float]:
    """(peak RSS MiB, RSS at the end MiB, build s, read s, arrays MiB) of reading ``root``'s
    lattices with the code under ``tree``; its spill dir left empty, or SystemExit."""
    spill = Path(tempfile.mkdtemp(dir=root, prefix="spill-"))
    hwm, rss, build, read, nbytes = fresh_process(CODE, root / "denlats",
                                                  root / "utt2num_frames", tree=tree,
                                                  env={"TMPDIR": str(spill)})
    left = [p.name for p in spill.iterdir()]
    if left:
        raise SystemExit(f"{tree}: left {left} in its TMPDIR")
    spill.rmdir()
    return hwm / 1024, rss / 1024, build, read, nbytes / 2**20


def index_bytes_per_utterance(num_utts: int = 100_000) -> float:
    """What the lattice and numerator stores keep in memory per utterance: traced allocations
    over ``num_utts`` Switchboard-like ids, each with arrays of 3 elements (the index does not
    depend on their size); the ids themselves are not counted (the corpus holds them)."""
    from asrdist.train.sequence_data import LATTICE_ARRAYS, LATTICE_INTS
    from asrdist.train.spilled_arrays import SpilledArrays

    ids = utterance_ids(num_utts)
    arrays = [np.zeros(3, d) for d in LATTICE_ARRAYS.values()]
    tracemalloc.start()
    try:
        lattices = SpilledArrays(list(LATTICE_ARRAYS.values()), len(LATTICE_INTS))
        numerators = SpilledArrays([np.int32])
        base = tracemalloc.get_traced_memory()[0]
        for utt in ids:
            lattices.put(utt, arrays, [0, 1, 2])
            numerators.put(utt, [arrays[0]])
        return (tracemalloc.get_traced_memory()[0] - base) / num_utts
    finally:
        tracemalloc.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dir", type=Path, required=True, help="scratch dir")
    parser.add_argument("--base-utts", type=int, default=2000)
    parser.add_argument("--scales", type=int, nargs="+", default=[1, 4])
    parser.add_argument("--nj", type=int, default=8)
    parser.add_argument("--width", type=int, default=20)
    parser.add_argument("--compare", metavar="REF", help="also run git revision REF's code")
    publish_option(parser, __file__)
    args = parser.parse_args()

    args.dir = args.dir.resolve()
    args.dir.mkdir(parents=True, exist_ok=True)
    trees = compared_trees(args.compare, args.dir)
    rows = []
    for scale in args.scales:
        root = args.dir / f"x{scale}-w{args.width}-nj{args.nj}"
        frames = generated_once(root, lambda r, n=args.base_utts * scale: generate(
            r, n, args.nj, args.width))
        lat_mb = sum(f.stat().st_size for f in (root / "denlats").glob("lat.*.gz")) / 2**20
        for name, tree in trees.items():
            rows.append((name, scale, args.base_utts * scale, frames, lat_mb,
                         *measure(tree, root)))
            print(rows[-1], flush=True)

    lines = [
        SECTION,
        "",
        f"`python -m bench.sequence_memory --dir DIR --base-utts {args.base_utts} --scales "
        f"{' '.join(map(str, args.scales))} --nj {args.nj} --width {args.width}"
        + (f" --compare {args.compare}" if args.compare else "") + " --publish`",
        "",
        f"Generated confusion-network lattices ({args.width} words competing at every frame, "
        f"words of 10..40 frames, 100..599 frames per utterance, {args.nj} jobs); each case "
        "builds DenominatorLattices of every utterance and reads every lattice back once, in "
        "its own process; peak RSS is that process's VmHWM at its end, RSS its VmRSS then. "
        "Arrays: the bytes of the LatticeArrays read back (what a dict holds; the spilled "
        "store's file in TMPDIR, which was empty after every case).",
        "",
        "| code | scale | utterances | frames | lat.*.gz MiB | arrays MiB | peak RSS MiB "
        "| RSS at end MiB | build s | read all s |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, scale, utts, frames, lat_mb, hwm, rss, build, read, arrays in rows:
        lines.append(f"| {name} | {scale}x | {utts} | {frames:.3g} | {lat_mb:.0f} "
                     f"| {arrays:.0f} | {hwm:.0f} | {rss:.0f} | {build:.1f} | {read:.1f} |")
    lines.append("")
    for name in trees:
        mine = [r for r in rows if r[0] == name]
        if len(mine) >= 2:
            (f0, r0), (f1, r1) = (mine[0][3], mine[0][5]), (mine[-1][3], mine[-1][5])
            slope = (r1 - r0) / (f1 - f0)
            lines.append(f"- {name}: peak RSS grows {slope * 1e9:.0f} MiB per 1e9 frames "
                         f"between {mine[0][1]}x and {mine[-1][1]}x; linear extrapolation to "
                         f"{SWB_SP_FRAMES:.1e} frames (these lattices, {args.nj} jobs): "
                         f"{r0 + slope * (SWB_SP_FRAMES - f0):.0f} MiB.")
    index = index_bytes_per_utterance()
    lines.append(f"- The index the two stores keep in memory: {index:.0f} bytes per utterance "
                 "(traced allocations over 100,000 ids, the ids not counted); at Switchboard's "
                 f"speed-perturbed 6e6 utterances about {index * 6e6 / 2**20:.0f} MiB.")
    publish(lines, args.publish)


if __name__ == "__main__":
    main()
