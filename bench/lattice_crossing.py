"""What a decoded lattice's crossing into Python costs, and what keeping it native saves
(issue 43 item 3): per utterance, after the compiled search and determinizer, decoding writes
the lattice to lat.N.gz and reads the sweep's 39 points off it. Before, the determinizer's flat
arrays were built into a CompactLattice of Python tuples, written by the Python writer, and
turned back into flat arrays for the compiled sweep; now the flat arrays go to the compiled
writer and the sweep as they are (asrdist.decode.lattice.native.FlatLattice).

Both paths run in this one process on the same lattices, alternating ``--reps`` times (the
machine is shared), their archive bytes and best paths checked equal. The lattices: the
decoding tests' system (tests/decode/kaldi_expected: its graph, model and score matrices,
whose lattices latgen-faster-mapped's equal), the matrices taken in turn for ``--utts``
utterances; or ``--graph``, ``--mdl`` and ``--scores`` (an ark) of a recipe's. CPU seconds
(time.process_time) of the search, of the determinizer (raw lattice to flat arrays), and of
the rest each way, summed over the utterances.

    .venv/bin/python -m bench.lattice_crossing [--utts 2000] [--reps 3]
        [--graph HCLG.fst --mdl final.mdl --scores loglikes.ark] [--publish]
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import kaldiio

from asrdist.decode.decode_dir import S5C_LMWTS, S5C_WIPS
from asrdist.decode.lattice import LatticeDecoder, LatticeOptions, best_paths
from asrdist.decode.lattice_io import compact_lattice_binary
from asrdist.kaldi.transition_model import read_transition_model
from bench.results import REPO, publish, publish_option, shown

EXPECTED = REPO / "tests" / "decode" / "kaldi_expected"
POINTS = [(lmwt, wip) for lmwt in S5C_LMWTS for wip in S5C_WIPS]


def crossing_before(utt: str, flat) -> tuple[bytes, list]:
    """The path before: tuples built, the Python writer, flat arrays again for the sweep."""
    clat = flat.compact()
    return compact_lattice_binary(utt, clat), best_paths(clat, POINTS)


def crossing_after(utt: str, flat) -> tuple[bytes, list]:
    """The path now: the flat arrays to the compiled writer and sweep."""
    return compact_lattice_binary(utt, flat), best_paths(flat, POINTS)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--utts", type=int, default=2000)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--graph", type=Path, default=EXPECTED / "HCLG.fst")
    ap.add_argument("--mdl", type=Path, default=EXPECTED / "final.mdl")
    ap.add_argument("--scores", type=Path, default=EXPECTED / "loglikes.ark")
    publish_option(ap, __file__)
    args = ap.parse_args()

    trans = read_transition_model(args.mdl)
    dec = LatticeDecoder(args.graph, trans, LatticeOptions(), native=True)
    matrices = [m for _, m in kaldiio.load_ark(str(args.scores))]
    scores = [matrices[i % len(matrices)] for i in range(args.utts)]
    t = time.process_time()
    raws = [dec.search(m) for m in scores]
    search = time.process_time() - t
    t = time.process_time()
    flats = [dec.flat_native(raw) for raw in raws]
    determinize = time.process_time() - t
    arcs = sum(len(f.arrays[2]) for f in flats)
    frames = sum(m.shape[0] for m in scores)

    cpu: dict[str, list[float]] = {"before": [], "after": []}
    for _ in range(args.reps):
        for name, way in (("before", crossing_before), ("after", crossing_after)):
            t = time.process_time()
            out = [way(f"u{i}", flat) for i, flat in enumerate(flats)]
            cpu[name].append(time.process_time() - t)
            if name == "before":
                expected = out
            elif out != expected:
                raise SystemExit("the two paths wrote different archives or best paths")
    before, after = (statistics.median(cpu[k]) for k in ("before", "after"))
    lines = [
        "## Decoding's lattice kept native: the crossing into Python measured",
        "",
        f"`.venv/bin/python -m bench.lattice_crossing --utts {args.utts} --reps {args.reps}` on "
        f"{shown(args.graph, 'HCLG.fst')} with {shown(args.scores, 'loglikes.ark')}'s "
        f"{len(matrices)} matrices in turn ({args.utts} utterances, {frames} frames and "
        f"{arcs} lattice arcs in all, s5c's {len(POINTS)} sweep points); CPU seconds summed "
        f"over the utterances, median of {args.reps} alternating runs.",
        "",
        "| step | CPU s | per utterance, ms |",
        "|---|---|---|",
        f"| search (compiled) | {search:.3f} | {1000 * search / args.utts:.2f} |",
        f"| determinizer to flat arrays (compiled) | {determinize:.3f} | "
        f"{1000 * determinize / args.utts:.2f} |",
        f"| before: CompactLattice built, Python writer, flat arrays again, sweep | {before:.3f} | "
        f"{1000 * before / args.utts:.2f} |",
        f"| now: flat arrays to the compiled writer and sweep | {after:.3f} | "
        f"{1000 * after / args.utts:.2f} |",
        "",
        f"Now / before: {after / before:.2f}x; the whole pass from the search on "
        f"{(search + determinize + after) / (search + determinize + before):.2f}x of before "
        "(archives and best paths the same bytes).",
    ]
    publish(lines, args.publish)


if __name__ == "__main__":
    main()
