"""Reading Kaldi's const graphs: peak memory and time of one decode job over a generated
const HCLG of a gigabyte, and of the graph read alone, against the code before (a text
round trip through kaldifst.compile) on a smaller graph of the same shape.

Generated, seeded, written straight in OpenFst's const layout with numpy: ``--states``
states with 1 to 4 arcs each (2.5 on average, as Kaldi's HCLG), a third of them outputting
one of 20 k words, next states a few states ahead, every 50th state final; a monophone
transition model of 40 phones (bench.decode_penalty_memory's); saved scores of ``--utts``
utterances of ``--frames`` frames that follow a random walk through the graph (per frame the
walk's pdf at 0, the others at -100): on flat random scores over a random graph the
tokens would be the figure, not the graph's reading (kaldi-decoder's search, which has no
max-active, held gigabytes of them). The read alone is what a decode job does:
``search_graph`` (the const file mapped) where the tree has it, else ``read_fst`` (a
VectorFst). Every figure is a fresh
process; its peak RSS is /proc's VmHWM, not ru_maxrss, which a process spawned by a bigger
one inherits across exec (the converter process of a const read: its ru_maxrss as a
child). ``--old-tree DIR`` (a checkout of the code before) runs that tree's reader on a graph
of ``--old-states`` states.

    .venv/bin/python -m bench.graph_read [--old-tree DIR] [--publish]
"""

from __future__ import annotations

import argparse
import json
import struct
import subprocess
import sys
import tempfile
from pathlib import Path

import kaldiio
import numpy as np

from bench.decode_penalty_memory import WORDS, make_setup
from bench.harness import fresh_process
from bench.results import publish, publish_option

_FST_MAGIC = 2125659606
_CONST_STATE = np.dtype([("final", "<f4"), ("pos", "<u4"), ("narcs", "<u4"),
                         ("nieps", "<u4"), ("noeps", "<u4")])
_ARC = np.dtype([("i", "<i4"), ("o", "<i4"), ("w", "<f4"), ("n", "<i4")])


def _string(text: str) -> bytes:
    return struct.pack("<i", len(text)) + text.encode()


def walk_scores(scp: Path, graph: Path, states: int, tid_to_pdf: list[int], seed: int) -> None:
    """Rewrite the saved scores (same utterances, frames and pdfs) to follow a random walk
    from the start state of :func:`write_const_graph`'s graph: per frame the walked arc's pdf
    at 0, the others at -100 (10 a frame after acwt 0.1, so the beam of 15 keeps few other
    tokens). The graph is read through a memory map, not loaded."""
    at = 4 + 4 + len("const") + 4 + len("standard") + 40  # version 2, unaligned
    heads = np.memmap(graph, _CONST_STATE, "r", at, (states,))
    arcs = np.memmap(graph, _ARC, "r", at + _CONST_STATE.itemsize * states)
    ark = scp.parent / "loglikes.ark"
    shapes = [(utt, m.shape) for utt, m in kaldiio.load_scp(str(scp)).items()]
    rng = np.random.default_rng(seed + 2)
    with kaldiio.WriteHelper(f"ark,scp:{ark},{scp}") as writer:
        for utt, (frames, pdfs) in shapes:
            m = np.full((frames, pdfs), -100.0, dtype=np.float32)
            state = 0
            for t in range(frames):
                arc = arcs[int(heads["pos"][state]) + int(rng.integers(heads["narcs"][state]))]
                m[t, tid_to_pdf[int(arc["i"])]] = 0.0
                state = int(arc["n"])
            writer(utt, m)


def write_const_graph(path: Path, states: int, tids: int, seed: int) -> int:
    """A random HCLG-like const FST (OpenFst's unaligned version 2 layout); its arc count."""
    rng = np.random.default_rng(seed)
    narcs = rng.integers(1, 5, states).astype(np.uint32)
    first = np.cumsum(narcs, dtype=np.int64) - narcs
    total = int(narcs.sum())
    with open(path, "wb") as f:
        f.write(struct.pack("<i", _FST_MAGIC) + _string("const") + _string("standard")
                + struct.pack("<iiQqqq", 2, 0, 1, 0, states, total))  # props: kExpanded
        for lo in range(0, states, 1 << 22):
            block = np.zeros(min(1 << 22, states - lo), _CONST_STATE)
            ids = np.arange(lo, lo + len(block))
            block["final"] = np.where(ids % 50 == 49, 0.0, np.inf)
            block["narcs"] = narcs[lo:lo + len(block)]
            block["pos"] = first[lo:lo + len(block)]
            f.write(block.tobytes())
        src = np.repeat(np.arange(states, dtype=np.int32), narcs)
        for lo in range(0, total, 1 << 23):
            arcs = np.zeros(min(1 << 23, total - lo), _ARC)
            arcs["i"] = rng.integers(1, tids + 1, len(arcs))
            arcs["o"] = np.where(rng.random(len(arcs)) < 0.33,
                                 rng.integers(1, WORDS + 1, len(arcs)), 0)
            arcs["w"] = rng.uniform(0.0, 5.0, len(arcs))
            arcs["n"] = (src[lo:lo + len(arcs)] + rng.integers(1, 4, len(arcs))) % states
            f.write(arcs.tobytes())
    return total


_PEAK = """
def peak_mb():
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
"""

_READ = _PEAK + """
import json, resource, sys, time
import kaldi_hmm_gmm
try:
    from asrdist.decode.lattice.native import search_graph as read
except ImportError:  # a tree before the compiled search
    from asrdist.decode.graph import read_fst as read
t = time.perf_counter()
fst = read(sys.argv[1])
print(json.dumps({"rss_mb": peak_mb(), "load_s": time.perf_counter() - t,
                  "child_mb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024}))
"""

_DECODE = _PEAK + """
import json, sys, time
import tempfile
from asrdist.decode.decode_dir import DecodeJob, Variant, _Worker
from asrdist.decode.lattice import LatticeOptions
graph, mdl, data, scp, utts, wips = sys.argv[1:7]
variants = (Variant(None, 10.0),) + tuple(Variant(f"10_{w}", 10.0, float(w))
                                          for w in wips.split(",") if float(w))
job = DecodeJob(graph, mdl, data, None, None, LatticeOptions(), variants, 1, loglikes=scp)
t = time.perf_counter()
worker = _Worker(job)
loaded = time.perf_counter() - t
with tempfile.TemporaryDirectory() as tmp:
    list(worker.run([f"u{k}" for k in range(int(utts))], f"{tmp}/lat.1.gz"))
print(json.dumps({"rss_mb": peak_mb(), "load_s": loaded, "total_s": time.perf_counter() - t}))
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--states", type=int, default=18_000_000)
    ap.add_argument("--old-states", type=int, default=1_000_000)
    ap.add_argument("--utts", type=int, default=3)
    ap.add_argument("--frames", type=int, default=200)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--old-tree", type=Path, default=None)
    ap.add_argument("--tmp", default=None, help="scratch folder (default: the system's)")
    publish_option(ap, __file__)
    args = ap.parse_args()
    new_tree = Path(__file__).resolve().parents[1]
    rows = []
    with tempfile.TemporaryDirectory(dir=args.tmp) as tmp:
        graph, mdl, data, scp = make_setup(Path(tmp), 10, 1, args.utts, args.frames, args.seed)
        tid_to_pdf = json.loads(subprocess.run(  # the model's, without importing kaldi here
            [sys.executable, "-c", "import sys; from asrdist.kaldi.transition_model import "
             "read_transition_model as r; print(r(sys.argv[1]).tid_to_pdf.tolist())", str(mdl)],
            capture_output=True, text=True, check=True, cwd=new_tree).stdout)
        tids = len(tid_to_pdf) - 1
        sizes = [args.states] + ([args.old_states] if args.old_tree else [])
        for states in sizes:
            arcs = write_const_graph(graph / "HCLG.fst", states, tids, args.seed)
            walk_scores(scp, graph / "HCLG.fst", states, tid_to_pdf, args.seed)
            size = (graph / "HCLG.fst").stat().st_size / 2**20
            trees = [("new", new_tree)] + ([("old", args.old_tree)] if args.old_tree else [])
            for name, tree in trees:
                if name == "old" and states != args.old_states:
                    continue
                read = fresh_process(_READ, graph / "HCLG.fst", tree=tree)
                jobs = [fresh_process(_DECODE, graph, mdl, data, scp, args.utts, wips, tree=tree)
                        for wips in ("0.0", "0.0,0.5,1.0")]
                rows.append((name, states, arcs, size, read, jobs))
    lines = [
        "## Decoding: reading Kaldi's const graphs", "",
        "2026-11-27, 2 shared CPU cores (other jobs beside it: times are contended). Command: "
        "`.venv/bin/python -m bench.graph_read" + (" --old-tree OLD" if args.old_tree else "")
        + " --publish`" + (" (OLD: a checkout of the code before the change)"
                           if args.old_tree else "") + ". A "
        "generated const HCLG (OpenFst's layout, 1-4 arcs per state, a third of them with a "
        f"word); {args.utts} utterances of {args.frames} frames whose scores follow a random "
        "walk through the graph (on flat random scores the tokens, not the graph, would be "
        "the figure). Peak RSS (VmHWM, the mapped file's pages it touched included) of a "
        "fresh process that only reads the graph as a job does (`search_graph`: the const "
        "file mapped; `read_fst` in a tree without it, the converter process beside it "
        "apart), and of one decode job (`_Worker`: load, then decode every "
        "utterance) with one insertion penalty (0.0) and with three (0.0, 0.5, 1.0).", "",
        "| code | states | arcs | HCLG.fst (MiB) | read: peak RSS (MiB) / x file | converter "
        "(MiB) | read (s) | job, 1 penalty: peak RSS (MiB) / x file | load / total (s) "
        "| job, 3 penalties: peak RSS (MiB) / x file | load / total (s) |",
        "|---|---|---|---|---|---|---|---|---|---|---|"]
    for name, states, arcs, size, read, jobs in rows:
        lines.append(
            f"| {name} | {states / 1e6:g} M | {arcs / 1e6:.1f} M | {size:.0f} | "
            f"{read['rss_mb']:.0f} / {read['rss_mb'] / size:.2f} | {read['child_mb']:.0f} | "
            f"{read['load_s']:.1f} | " + " | ".join(
                f"{j['rss_mb']:.0f} / {j['rss_mb'] / size:.2f} | "
                f"{j['load_s']:.1f} / {j['total_s']:.1f}" for j in jobs) + " |")
    publish(lines, args.publish)


if __name__ == "__main__":
    main()
