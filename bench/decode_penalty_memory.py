"""Peak memory of one decode job (asrdist.decode.decode_dir's worker) for 1, 3 and 5 word
insertion penalties, on a generated graph of realistic size.

Generated, seeded: a graph dir whose HCLG.fst is a random ilabel-sorted vector FST of
``--states`` states with ``--arcs`` arcs each (no epsilons; about a third of the arcs output
one of 20 k words; every 50th state final), written straight in OpenFst's binary layout; a
monophone transition model of 40 phones; saved scores (``asrdist-compute-loglikes``' layout)
of ``--utts`` utterances of ``--frames`` random frames. Each run is a fresh process that
loads the worker and decodes every utterance with the main setting and one LM weight per
penalty, then reports its peak RSS (``ru_maxrss``) and wall time. ``--old-tree DIR`` (a
checkout of an older asrdist) runs that tree's worker too.

    .venv/bin/python -m bench.decode_penalty_memory [--old-tree DIR] [--publish]
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import kaldi_hmm_gmm as khg  # before kaldifst, or the process hangs
import kaldiio
import numpy as np

from asrdist.hmm.tree import monophone_tree
from asrdist.kaldi.final_mdl import write_final_mdl
from asrdist.kaldi.lang import Lang, prepare_lang
from bench.harness import fresh_process
from bench.results import publish, publish_option

PENALTIES = {1: (0.0,), 3: (0.0, 0.5, 1.0), 5: (0.0, 0.25, 0.5, 0.75, 1.0)}
WORDS = 20000
_FST_MAGIC = 2125659606


def make_model(root: Path) -> tuple[Path, int, int]:
    """A monophone transition model of 40 phones: final.mdl, its transition-ids and pdfs."""
    d = root / "dict"
    d.mkdir(parents=True)
    phones = [f"P{i}" for i in range(40)]
    (d / "silence_phones.txt").write_text("SIL\nSPN\n")
    (d / "nonsilence_phones.txt").write_text("".join(f"{p}\n" for p in phones))
    (d / "optional_silence.txt").write_text("SIL\n")
    (d / "lexicon.txt").write_text("<unk> SPN\n" + "".join(
        f"w{i} {phones[i % 40]} {phones[(i * 7) % 40]}\n" for i in range(200)))
    prepare_lang(d, root / "lang")
    lang = Lang.load(root / "lang")
    topo = lang.topology()
    tree = monophone_tree(topo, lang.phone_sets)
    tm = khg.TransitionModel(tree, topo)
    write_final_mdl(root / "final.mdl", tm)
    return root / "final.mdl", tm.num_transition_ids, tree.num_pdfs


def _string(text: str) -> bytes:
    return np.int32(len(text)).tobytes() + text.encode()


def write_graph(path: Path, states: int, arcs: int, tids: int, seed: int) -> None:
    """A random HCLG-like vector FST in OpenFst's binary layout (header, then per state: final
    cost, number of arcs, arcs), written in blocks of states."""
    rng = np.random.default_rng(seed)
    header = (np.int32(_FST_MAGIC).tobytes() + _string("vector") + _string("standard")
              + np.array([2, 0], "<i4").tobytes() + np.uint64(3).tobytes()  # version, flags
              + np.array([0, states, states * arcs], "<i8").tobytes())  # start, counts
    state = np.dtype([("final", "<f4"), ("narcs", "<i8"),
                      ("arcs", [("i", "<i4"), ("o", "<i4"), ("w", "<f4"), ("n", "<i4")], arcs)],
                     align=False)
    with open(path, "wb") as f:
        f.write(header)
        for lo in range(0, states, 200_000):
            n = min(200_000, states - lo)
            block = np.zeros(n, state)
            ids = np.arange(lo, lo + n)
            block["final"] = np.where(ids % 50 == 49, 0.0, np.inf)
            block["narcs"] = arcs
            a = block["arcs"]
            a["i"] = np.sort(rng.integers(1, tids + 1, (n, arcs)), axis=1)
            a["o"] = np.where(rng.random((n, arcs)) < 0.33, rng.integers(1, WORDS + 1,
                                                                          (n, arcs)), 0)
            a["w"] = rng.uniform(0.0, 5.0, (n, arcs)).astype("<f4")
            step = rng.integers(1, 4, (n, arcs))
            step[:, -1] = rng.integers(0, states, n) - ids  # one jump anywhere
            a["n"] = (ids[:, None] + step) % states
            f.write(block.tobytes())


def make_setup(root: Path, states: int, arcs: int, utts: int, frames: int,
               seed: int) -> tuple[Path, Path, Path, Path]:
    """graph dir, final.mdl, data dir and loglikes scp under ``root``."""
    mdl, tids, pdfs = make_model(root / "model")
    graph = root / "graph"
    graph.mkdir()
    write_graph(graph / "HCLG.fst", states, arcs, tids, seed)
    (graph / "words.txt").write_text("<eps> 0\n" + "".join(
        f"w{i} {i}\n" for i in range(1, WORDS + 1)) + f"#0 {WORDS + 1}\n")
    data = root / "data"
    data.mkdir()
    (data / "utt2spk").write_text("".join(f"u{k} s\n" for k in range(utts)))
    ll = root / "loglikes"
    ll.mkdir()
    rng = np.random.default_rng(seed + 1)
    with kaldiio.WriteHelper(f"ark,scp:{ll / 'loglikes.ark'},{ll / 'loglikes.scp'}") as w:
        for k in range(utts):
            w(f"u{k}", rng.normal(-8.0, 3.0, (frames, pdfs)).astype(np.float32))
    (ll / "num_pdfs").write_text(f"{pdfs}\n")
    return graph, mdl, data, ll / "loglikes.scp"


_RUN = """
import hashlib, json, resource, sys, time
import tempfile
from asrdist.decode.decode_dir import DecodeJob, Variant, _Worker
from asrdist.decode.lattice import LatticeOptions
graph, mdl, data, scp, wips, utts = sys.argv[1:7]
wips = [float(w) for w in wips.split(",")]
variants = (Variant(None, 10.0),) + tuple(Variant(f"10_{w:.1f}", 10.0, w) for w in wips)
job = DecodeJob(graph, mdl, data, None, None, LatticeOptions(), variants, 1, loglikes=scp)
t = time.perf_counter()
worker = _Worker(job)
loaded = time.perf_counter() - t
with tempfile.TemporaryDirectory() as tmp:
    results = list(worker.run([f"u{k}" for k in range(int(utts))], f"{tmp}/lat.1.gz"))
print(json.dumps({"rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "load_s": loaded, "total_s": time.perf_counter() - t,
                  "texts": hashlib.sha1(repr(sorted((str(v), u, w) for r in results
                                                    for v, t in r.texts.items()
                                                    for u, w in t.items())).encode()
                                        ).hexdigest()}))
"""


def measure(tree: Path, setup: tuple[Path, Path, Path, Path], wips: tuple[float, ...],
            utts: int) -> dict:
    """Peak RSS and times of a fresh process running ``tree``'s decode worker."""
    return fresh_process(_RUN, *setup, ",".join(map(str, wips)), utts, tree=tree)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--states", type=int, default=3_000_000)
    ap.add_argument("--arcs", type=int, default=4)
    ap.add_argument("--utts", type=int, default=4)
    ap.add_argument("--frames", type=int, default=300)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--old-tree", type=Path, default=None)
    publish_option(ap, __file__)
    args = ap.parse_args()
    new_tree = Path(__file__).resolve().parents[1]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        setup = make_setup(Path(tmp), args.states, args.arcs, args.utts, args.frames,
                           args.seed)
        size = setup[0].joinpath("HCLG.fst").stat().st_size / 2**20
        for count, wips in PENALTIES.items():
            row = [count, measure(new_tree, setup, wips, args.utts)]
            if args.old_tree is not None:
                row.append(measure(args.old_tree, setup, wips, args.utts))
            rows.append(row)
    lines = [
        "## Decode job memory across insertion penalties (asrdist-decode --wip)", "",
        "Command: `.venv/bin/python -m bench.decode_penalty_memory"
        + (" --old-tree OLD" if args.old_tree else "")
        + f" --publish` (OLD: a checkout of the code before the change). A "
        f"generated graph: {args.states} states x {args.arcs} arcs, HCLG.fst {size:.0f} MB "
        f"on disk; {args.utts} utterances of {args.frames} frames, a lattice search (no "
        "max-active); one "
        "decode job in a fresh process (peak RSS: ru_maxrss). 2 shared cores, other jobs "
        "beside it (times are contended).", "",
        "| penalties | new: peak RSS (MB) | new: load / total (s) | old: peak RSS (MB) "
        "| old: load / total (s) | same texts as old |", "|---|---|---|---|---|---|"]
    for count, new, *old in rows:
        cells = [f"{new['rss_mb']:.0f}", f"{new['load_s']:.0f} / {new['total_s']:.0f}"]
        cells += ([f"{old[0]['rss_mb']:.0f}", f"{old[0]['load_s']:.0f} / {old[0]['total_s']:.0f}",
                   "yes" if old[0]["texts"] == new["texts"] else "NO"] if old else ["-"] * 3)
        lines.append(f"| {count} ({', '.join(map(str, PENALTIES[count]))}) | "
                     + " | ".join(cells) + " |")
    publish(lines, args.publish)


if __name__ == "__main__":
    main()
