"""The compiled determinizer against the Python one it was transcribed from, on a whole test
set: the same compact lattice to the bit for every utterance, and the CPU each takes.

Inputs: the mini recipe's mono GMM scores of data/test_mfcc (the first ``--utts``; all by
default) and its trigram graph (recipes/mini/exp). Each utterance is searched once (the
compiled search where built, else kaldi-decoder's) and its raw lattice made compact both ways
(``LatticeDecoder.compact_native`` and ``compact_python``: the raw lattice's reading and the
conversion back to Python objects included); any utterance that differs is named.

    .venv/bin/python -m bench.lattice_native_equal [--utts N] [--publish]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import kaldiio

from asrdist.decode import lattice as L
from asrdist.kaldi.transition_model import read_transition_model
from asrdist.testing.lattices import lattice_bits
from bench.lattice_decode import gmm_scores
from bench.results import REPO, publish, publish_option

MINI = REPO / "recipes" / "mini"


def compare(mdl: Path, hclg: Path, ark: Path) -> dict:
    """Utterances, lattice states, CPU seconds of each determinizer and the utterances whose
    lattices differ."""
    dec = L.LatticeDecoder(hclg, read_transition_model(mdl), native=True)
    found = {"utts": 0, "states": 0, "native_s": 0.0, "python_s": 0.0, "differ": []}
    for utt, scores in kaldiio.load_ark(str(ark)):
        raw = dec.search(scores)
        t = time.process_time()
        ours = dec.compact_native(raw)
        found["native_s"] += time.process_time() - t
        t = time.process_time()
        python = dec.compact_python(raw)
        found["python_s"] += time.process_time() - t
        found["utts"] += 1
        found["states"] += python.num_states
        if lattice_bits(ours) != lattice_bits(python):
            found["differ"].append(utt)
    return found


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--utts", type=int, default=10**6, help="the first N test utterances")
    publish_option(ap, __file__)
    args = ap.parse_args()
    mdl, hclg = MINI / "exp/mono/final.mdl", MINI / "exp/graph/HCLG.fst"
    with tempfile.TemporaryDirectory() as tmp:
        ark = Path(tmp) / "scores.ark"
        gmm_scores(mdl, MINI / "data/test_mfcc", args.utts, ark)
        found = compare(mdl, hclg, ark)
    differ = ", ".join(found["differ"][:10]) or "none"
    command = "bench.lattice_native_equal" + (f" --utts {args.utts}" if args.utts < 10**6
                                              else "")
    lines = ["## The compiled determinizer against the Python one, a whole test set", "",
             f"Command: `.venv/bin/python -m {command}`. The mini recipe's mono GMM on "
             f"data/test_mfcc, its trigram graph, decode.sh's lattice options; CPU seconds of "
             "the post-search part only, one process.", "",
             "| utterances | lattice states | equal to the bit | differing | compiled (CPU s) | "
             "Python (CPU s) | Python / compiled |", "|---:|---:|---:|---|---:|---:|---:|",
             f"| {found['utts']} | {found['states']} | "
             f"{found['utts'] - len(found['differ'])} | {differ} | {found['native_s']:.2f} | "
             f"{found['python_s']:.1f} | {found['python_s'] / found['native_s']:.1f} |"]
    publish(lines, args.publish)
    if found["differ"]:
        raise SystemExit(f"bench.lattice_native_equal: {len(found['differ'])} lattices differ")


if __name__ == "__main__":
    main()
