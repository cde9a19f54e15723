"""The lattice search's CPU beside latgen-faster-mapped's, interleaved: Kaldi, this tree and
(``--old-tree``) another revision's asrdist decode the same utterances in turn, ``--reps``
times, so that each comparison is made under the same load of a shared machine (the load
moves every process's CPU seconds; figures taken minutes apart do not compare).

Inputs: the mini recipe's mono GMM scores of the first ``--utts`` utterances of
data/test_mfcc and its trigram graph (recipes/mini/exp). Ours: ``LatticeDecoder.decode`` per
utterance (search, raw lattice read, cost offsets, phone-pruned determinization: compiled where
the tree has asrdist.decode.lattice._native built, Python otherwise, as the table says), the
graph read apart, and the C++ search alone in the same process: the tree's own compiled search
(its raw lattice's bytes included) where it has one (``LatticeDecoder.searcher``), else
kaldi-decoder's LatticeSimpleDecoder; Kaldi: latgen-faster-mapped with decode.sh's options,
its user + system CPU (its graph read included). Medians over the repetitions.

    .venv/bin/python -m bench.lattice_search_ab [--old-tree OLD] [--utts 40] [--reps 3]
        [--kaldi-bin /opt/kaldi-lite/bin] [--publish]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from pathlib import Path

import kaldiio

from bench.harness import fresh_process
from bench.lattice_decode import gmm_scores
from bench.lattice_decode_eval2000 import LATGEN_OPTS, LAUNCH
from bench.results import REPO, publish, publish_option

MINI = REPO / "recipes" / "mini"

_OURS = """
import json, sys, time
import kaldiio, numpy as np
from asrdist.decode import lattice as L
from asrdist.kaldi.transition_model import read_transition_model
mdl, hclg, ark = sys.argv[1:4]
trans = read_transition_model(mdl)
own = L.native_search() == "asrdist"
if own:  # the tree's compiled search reads the graph's file
    dec = L.LatticeDecoder(hclg, trans)
else:
    L.load_kaldi_decoder()
    import kaldifst
    dec = L.LatticeDecoder(kaldifst.StdVectorFst.read(hclg), trans)
scores = [m for _, m in kaldiio.load_ark(ark)]
t = time.process_time()
for m in scores:
    dec.decode(m)
whole = time.process_time() - t
t = time.process_time()
for m in scores:
    matrix = np.ascontiguousarray(L.F32(0.1) * m[:, trans.tid_to_pdf[1:]].astype(L.F32))
    if own:
        dec.searcher.decode(matrix)
    else:
        dec.decoder.decode(dec.kd.DecodableCtc(matrix))
print(json.dumps({"cpu": whole, "search": time.process_time() - t,
                  "native": getattr(dec, "native", False), "own": own}))
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--old-tree", type=Path, default=None)
    ap.add_argument("--utts", type=int, default=40)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--kaldi-bin", type=Path, default=Path("/opt/kaldi-lite/bin"))
    publish_option(ap, __file__)
    args = ap.parse_args()
    if args.utts < 1 or args.reps < 1:
        raise SystemExit("--utts and --reps must be at least 1")
    mdl, hclg = MINI / "exp/mono/final.mdl", MINI / "exp/graph/HCLG.fst"
    with tempfile.TemporaryDirectory() as tmp:
        ark = Path(tmp) / "scores.ark"
        gmm_scores(mdl, MINI / "data/test_mfcc", args.utts, ark)
        audio = sum(m.shape[0] for _, m in kaldiio.load_ark(str(ark))) * 0.01
        trees = [("this tree", REPO)] + ([("--old-tree", args.old_tree)] if args.old_tree
                                         else [])
        kaldi: list[float] = []
        ours: dict[str, list[dict]] = {name: [] for name, _ in trees}
        for _ in range(args.reps):
            kaldi.append(fresh_process(
                LAUNCH, args.kaldi_bin / "latgen-faster-mapped", *LATGEN_OPTS, mdl, hclg,
                f"ark:{ark}", "ark:/dev/null", env={"OPENBLAS_NUM_THREADS": "1"})["cpu"])
            for name, tree in trees:
                ours[name].append(fresh_process(_OURS, mdl, hclg, ark, tree=tree,
                                                env={"OMP_NUM_THREADS": "1"}))
    k = statistics.median(kaldi)
    lines = ["## The lattice search beside latgen-faster-mapped, interleaved", "",
             f"Command: `.venv/bin/python -m bench.lattice_search_ab"
             f"{' --old-tree OLD' if args.old_tree else ''} --utts {args.utts} --reps "
             f"{args.reps}` (OLD: a checkout of the code before). {args.utts} mini test "
             f"utterances, {audio:.1f} s of audio; medians of {args.reps} interleaved runs, "
             "CPU seconds, one thread each, on a shared machine.", "",
             "| what | CPU seconds | / Kaldi |", "|---|---|---|",
             f"| Kaldi latgen-faster-mapped (graph read included) | {k:.2f} | 1.00 |"]
    for name, runs in ours.items():
        cpu = statistics.median(r["cpu"] for r in runs)
        search = statistics.median(r["search"] for r in runs)
        lattice = "compiled" if all(r["native"] for r in runs) else "in Python"
        own = "our compiled" if all(r.get("own") for r in runs) else "kaldi-decoder's"
        lines += [f"| ours ({name}): decode (search + lattice {lattice}) | {cpu:.2f} | "
                  f"{cpu / k:.2f} |",
                  f"| ours ({name}): of which the search alone ({own}) | {search:.2f} | "
                  f"{search / k:.2f} |"]
    publish(lines, args.publish)


if __name__ == "__main__":
    main()
