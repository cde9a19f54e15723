"""What one 4-gram rescoring of a decode dir costs beside the lattice pass that made it
(issue 32 asks: the 39-point sweep + one rescoring <= 1.3x one lattice pass).

On the decoding tests' Kaldi-format system (tests/decode/kaldi_expected: the tiny trigram
HCLG.fst, its G.fst, the hand-written 4-gram fg.arpa), ``--copies`` copies of its four
utterances' scores (three spelled sentences with rivals close behind, 40 frames of noise),
each copy with seeded noise added (sd ``--jitter``), so the lattices differ but stay of the
committed ones' size (longer noise makes lattices that explode without --max-active, which
the lattice decoder does not have):

- the lattice pass: ``python -m asrdist.decode.latgen`` (latgen-faster-mapped's job), timed
  as one process, start-up included;
- the sweep: LMWT 5..17 x WIP 0.0/0.5/1.0 best paths read off the lattices
  (:func:`best_path_words`);
- the rescoring: read lat.1.gz, :func:`rescore` every lattice, write the archive, with the
  time to load G.fst and the ARPA LM apart;
- with ``--kaldi BIN`` (Kaldi's bin/, e.g. /opt/kaldi-lite/bin), the same through Kaldi's
  latgen-faster-mapped and lattice-lmrescore | lattice-lmrescore-const-arpa (on our
  lattices), for scale, and how many of Kaldi's rescored lattices equal ours.

    .venv/bin/python -m bench.lmrescore_cost [--copies 25] [--kaldi BIN] [--publish]

The tiny graph makes the lattice pass cheap and the lattices small beside a real system's:
read the ratio as this machine's cost of the Python rescoring per lattice arc, not as an
eval2000 figure.
"""

from __future__ import annotations

import argparse
import gzip
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import kaldiio
import numpy as np

from asrdist.decode.arpa import read_arpa
from asrdist.decode.lattice import best_path_words
from asrdist.decode.lattice_io import write_lattices
from asrdist.decode.lmrescore import BackoffFst, read_lattice_archive, rescore
from asrdist.kaldi.data_dir import read_symbols
from bench.results import publish, publish_option

ROOT = Path(__file__).resolve().parents[1]
SYSTEM = ROOT / "tests" / "decode" / "kaldi_expected"
LMWTS = range(5, 18)
WIPS = (0.0, 0.5, 1.0)


def _timed(argv: list[str], **kwargs) -> float:
    start = time.perf_counter()
    subprocess.run(argv, check=True, **kwargs)
    return time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--copies", type=int, default=25)
    ap.add_argument("--jitter", type=float, default=0.5)
    ap.add_argument("--seed", type=int, default=32)
    ap.add_argument("--kaldi", type=Path, default=None, help="Kaldi's bin/ to time it too")
    publish_option(ap, __file__)
    args = ap.parse_args()
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
    rng = np.random.default_rng(args.seed)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        base = dict(kaldiio.load_ark(str(SYSTEM / "loglikes.ark")))
        scores = {f"{utt}-{i:03d}": (m + rng.normal(0.0, args.jitter, m.shape)).astype(
            np.float32) for i in range(args.copies) for utt, m in sorted(base.items())}
        frames = sum(m.shape[0] for m in scores.values())
        kaldiio.save_ark(str(work / "loglikes.ark"), scores)
        lats = work / "lat.1.gz"
        t_latgen = _timed([sys.executable, "-m", "asrdist.decode.latgen",
                           str(SYSTEM / "final.mdl"), str(SYSTEM / "HCLG.fst"),
                           str(work / "loglikes.ark"), str(lats)], cwd=ROOT, env=env)
        lattices = read_lattice_archive(lats)
        arcs = sum(len(a) for c in lattices.values() for a in c.arcs)

        start = time.perf_counter()
        for clat in lattices.values():
            for lmwt in LMWTS:
                for wip in WIPS:
                    best_path_words(clat, lmwt, wip)
        t_sweep = time.perf_counter() - start

        start = time.perf_counter()
        g = BackoffFst(SYSTEM / "G.fst")
        lm = read_arpa(SYSTEM / "fg.arpa", read_symbols(SYSTEM / "words.txt"), "<unk>")
        t_load = time.perf_counter() - start
        start = time.perf_counter()
        rescored = [(k, rescore(c, g, lm)) for k, c in read_lattice_archive(lats).items()]
        write_lattices(work / "fg.1.gz", [(k, c) for k, c in rescored if c is not None])
        t_rescore = time.perf_counter() - start

        total = t_sweep + t_load + t_rescore
        lines = ["## One 4-gram rescoring beside the lattice pass", "",
                 f"`.venv/bin/python -m bench.lmrescore_cost --copies {args.copies} --jitter "
                 f"{args.jitter}{' --kaldi BIN' if args.kaldi else ''}` (wall times, "
                 f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at the end)", "",
                 f"- {len(scores)} utterances, {frames} frames, {arcs} lattice arcs "
                 f"({arcs / len(scores):.0f} per lattice)",
                 f"- lattice pass (python -m asrdist.decode.latgen): {t_latgen:.2f} s",
                 f"- sweep, 39 points: {t_sweep:.2f} s",
                 f"- rescoring: {t_rescore:.2f} s (+ {t_load:.3f} s loading G.fst and the "
                 f"ARPA LM): {1e6 * t_rescore / arcs:.0f} us per input arc",
                 f"- sweep + rescoring = {total / t_latgen:.2f} x the lattice pass (goal <= 1.3)"]

        if args.kaldi is not None:
            kenv = {**env, "PATH": f"{args.kaldi}:{env['PATH']}"}
            t_kaldi_latgen = _timed(
                ["latgen-faster-mapped", "--max-active=7000", "--beam=15.0",
                 "--lattice-beam=8.0", "--acoustic-scale=0.1", "--allow-partial=true",
                 str(SYSTEM / "final.mdl"), str(SYSTEM / "HCLG.fst"),
                 f"ark:{work / 'loglikes.ark'}", f"ark:{work / 'k.lat'}"],
                env=kenv, stderr=subprocess.DEVNULL)
            shutil.copy(SYSTEM / "G.carpa", work / "G.carpa")  # fg.arpa's, committed
            write_lattices(work / "ours.lat.gz", lattices.items())
            (work / "ours.lat").write_bytes(gzip.decompress((work / "ours.lat.gz").read_bytes()))
            t_kaldi_rescore = _timed(
                ["bash", "-c", "lattice-lmrescore --lm-scale=-1.0 ark:ours.lat "
                 f"'fstproject --project_type=output {SYSTEM / 'G.fst'} |' ark:- | "
                 "lattice-lmrescore-const-arpa --lm-scale=1.0 ark:- G.carpa ark:fg.lat"],
                env=kenv, cwd=work, stderr=subprocess.DEVNULL)
            kaldi = read_lattice_archive(work / "fg.lat")
            same = sum(1 for k, c in rescored if c is not None and k in kaldi
                       and (kaldi[k].arcs, kaldi[k].final) == (c.arcs, c.final))
            lines.append(f"- Kaldi: latgen-faster-mapped {t_kaldi_latgen:.2f} s; "
                         f"lattice-lmrescore | lattice-lmrescore-const-arpa "
                         f"{t_kaldi_rescore:.2f} s (same lattices); its rescored lattices equal "
                         f"ours (states, arcs, strings, float32 costs): {same} of {len(kaldi)}")
        publish(lines, args.publish)


if __name__ == "__main__":
    main()
