"""Peak memory and time of alignment ingestion (asrdist-ingest-ali) as the corpus grows.

Generates Kaldi alignment dirs of 1x, 4x and 16x a base number of utterances (``ali.N.gz``
in Kaldi's binary format, split by speaker over ``--nj`` jobs as Kaldi's split_data.sh does,
a ``final.mdl``) and their ``feats.scp``, then runs ingestion on each in a process of its own
and takes that process's peak resident memory (its VmHWM) and wall time. With
``--compare REF`` the same inputs are also ingested by the code of git revision REF (extracted
with ``git archive``), so a table shows before and after.

The data are shaped like Switchboard with speed perturbation: ids like
``sp0.9-sw02001-A_000123-000456``, 100..599 frames per utterance (3.5 s on average), runs of
3..10 frames per transition-id, about 1 % of the feature utterances without an alignment and
1 % one frame off. feats.scp points at Kaldi float-matrix headers (``\0BFM``, rows, 40
columns) with no data after them (1.5e8 frames of 40-dim features would be 24 GB): a reader
that loaded a matrix would fail, so ingestion is shown to learn every utterance's length from
the headers alone (``--frames-from headers``, no utt2num_frames), or from utt2num_frames
(``--frames-from utt2num_frames``).

    .venv/bin/python -m bench.ingest_memory --dir DIR [--base-utts 27000] [--scales 1 4 16]
        [--compare main] [--frames-from headers] [--publish]
"""

from __future__ import annotations

import argparse
import gzip
import os
import subprocess
import time
from pathlib import Path

import kaldi_hmm_gmm as khg  # noqa: I001  (must be imported before anything loading kaldifst)
import numpy as np

from asrdist.kaldi.alignments import write_int32_ark
from asrdist.kaldi.final_mdl import write_final_mdl
from bench.harness import compared_trees, fresh_process, generated_once
from bench.results import publish, publish_option

NUM_PHONES = 300  # 3-state phones: 900 pdfs (a tri4 tree has ~9000; the count does not matter)
DIM = 40
SWB_SP_FRAMES = 2.2e9  # Switchboard 2000 h with 3-way speed perturbation

SECTION = "## Alignment ingestion: memory and time against corpus size"


def transition_model() -> khg.TransitionModel:
    states = "".join(
        f"<State> {s} <PdfClass> {s} <Transition> {s} 0.75 <Transition> {s + 1} 0.25 </State> "
        for s in range(3)
    )
    phones = " ".join(str(p) for p in range(1, NUM_PHONES + 1))
    topo = khg.HmmTopology()
    topo.read(f"<Topology> <TopologyEntry> <ForPhones> {phones} </ForPhones> {states}"
              "<State> 3 </State> </TopologyEntry> </Topology>")
    ctx = khg.monophone_context_dependency(topo.phones, topo.get_phone_to_num_pdf_classes())
    return khg.TransitionModel(ctx, topo)


def utterance_ids(num_utts: int) -> list[str]:
    """Switchboard-like ids in C order: speed, conversation side, times."""
    ids, per_side = [], 60
    for n in range(num_utts):
        side, k = divmod(n, per_side)
        speed = ("0.9", "1.0", "1.1")[side % 3]
        conv, channel = divmod(side // 3, 2)
        start = k * 500
        ids.append(f"sp{speed}-sw{2001 + conv:05d}-{'AB'[channel]}_{start:06d}-{start + 400:06d}")
    return sorted(ids, key=str.encode)


def generate(root: Path, num_utts: int, nj: int, frames_from: str, seed: int = 0) -> int:
    """Write root/ali (ali.N.gz, num_jobs, final.mdl) and root/data (feats.scp, feats.ark);
    returns the number of feature frames."""
    rng = np.random.default_rng(seed)
    tm = transition_model()
    ali, data = root / "ali", root / "data"
    ali.mkdir(parents=True)
    data.mkdir(parents=True)
    write_final_mdl(ali / "final.mdl", tm)
    (ali / "num_jobs").write_text(f"{nj}\n")
    utts = utterance_ids(num_utts)
    frames = rng.integers(100, 600, num_utts)
    total = 0
    with open(data / "feats.ark", "wb") as ark, open(data / "feats.scp", "w") as scp, \
            open(data / "utt2num_frames", "w") as u2n:
        for utt, n in zip(utts, frames, strict=True):
            ark.write(f"{utt} ".encode())
            scp.write(f"{utt} {data / 'feats.ark'}:{ark.tell()}\n")
            u2n.write(f"{utt} {n}\n")
            ark.write(b"\0BFM \4" + int(n).to_bytes(4, "little") + b"\4"
                      + DIM.to_bytes(4, "little"))  # the header only: no matrix data
            total += int(n)
    if frames_from == "headers":
        (data / "utt2num_frames").unlink()
    bounds = np.linspace(0, num_utts, nj + 1).round().astype(int)
    for job in range(nj):
        with gzip.open(ali / f"ali.{job + 1}.gz", "wb", compresslevel=1) as gz:
            for i in range(bounds[job], bounds[job + 1]):
                if rng.random() < 0.01:
                    continue  # aligning this utterance failed
                n = int(frames[i]) + (1 if rng.random() < 0.01 else 0)
                runs = rng.integers(3, 11, n // 3 + 1)
                tids = np.repeat(rng.integers(1, tm.num_transition_ids + 1, runs.size), runs)[:n]
                write_int32_ark(gz, [(utts[i], tids.astype(np.int32))])
    return total


def measure(tree: Path, root: Path, out: Path) -> tuple[float, float]:
    """(peak RSS in MiB, wall seconds) of ingesting ``root`` with the code under ``tree``."""
    code = ("import sys; from asrdist.data.ingest import ingest_alignments; "
            "ingest_alignments(sys.argv[1], sys.argv[2], sys.argv[3]); "
            "print(open('/proc/self/status').read().split('VmHWM:')[1].split()[0])")
    start = time.perf_counter()
    kib = fresh_process(code, root / "ali", root / "data" / "feats.scp", out, tree=tree,
                        env={"PATH": os.defpath})  # no Kaldi ali-to-pdf
    # The process's own high-water mark: wait4's ru_maxrss would also count this process's
    # memory, which the child's address space held between fork and exec.
    return kib / 1024, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dir", type=Path, required=True, help="scratch dir (several GB)")
    parser.add_argument("--base-utts", type=int, default=27_000)
    parser.add_argument("--scales", type=int, nargs="+", default=[1, 4, 16])
    parser.add_argument("--nj", type=int, default=16)
    parser.add_argument("--frames-from", choices=["headers", "utt2num_frames"], default="headers")
    parser.add_argument("--compare", metavar="REF", help="also run git revision REF's code")
    publish_option(parser, __file__)
    args = parser.parse_args()

    args.dir = args.dir.resolve()
    trees = compared_trees(args.compare, args.dir)
    rows = []
    for scale in args.scales:
        root = args.dir / f"x{scale}"
        frames = generated_once(root, lambda r, n=args.base_utts * scale: generate(
            r, n, args.nj, args.frames_from))
        ali_mb = sum(f.stat().st_size for f in (root / "ali").glob("ali.*.gz")) / 2**20
        for name, tree in trees.items():
            out = root / f"out-{name.replace(' ', '_')}"
            rss, wall = measure(tree, root, out)
            ark_mb = (out / "pdf.ark").stat().st_size / 2**20
            rows.append((name, scale, args.base_utts * scale, frames, ali_mb, ark_mb, rss, wall))
            print(rows[-1], flush=True)
            subprocess.run(["rm", "-rf", str(out)], check=True)

    source = "the ark headers" if args.frames_from == "headers" else "utt2num_frames"
    lines = [
        SECTION,
        "",
        f"`python -m bench.ingest_memory --dir DIR --base-utts {args.base_utts} --scales "
        f"{' '.join(map(str, args.scales))} --nj {args.nj} --frames-from {args.frames_from}"
        + (f" --compare {args.compare}" if args.compare else "") + " --publish`",
        "",
        "Generated Switchboard-shaped alignment dirs (900 pdfs, ~350 frames per utterance, "
        f"{args.nj} jobs, 1 % of utterances unaligned, 1 % one frame long) and feats.scp "
        f"(frame counts from {source}; the ark holds the matrix headers only); each ingestion "
        "in its own process; peak RSS is that process's VmHWM at its end (/proc/self/status; "
        "wait4's ru_maxrss would add the benchmark's own memory, held between fork and exec).",
        "",
        "| code | scale | utterances | frames | ali.*.gz MiB | pdf.ark MiB | peak RSS MiB "
        "| wall s | frames/s |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name, scale, utts, frames, ali_mb, ark_mb, rss, wall in rows:
        lines.append(f"| {name} | {scale}x | {utts} | {frames:.3g} | {ali_mb:.0f} | {ark_mb:.0f} "
                     f"| {rss:.0f} | {wall:.1f} | {frames / wall:.3g} |")
    lines.append("")
    for name in trees:
        mine = [r for r in rows if r[0] == name]
        if len(mine) >= 2:
            (_, _, _, f0, _, _, r0, _), (_, _, _, f1, _, _, r1, w1) = mine[0], mine[-1]
            slope = (r1 - r0) / (f1 - f0)
            lines.append(
                f"- {name}: peak RSS grows {slope * 1e9:.0f} MiB per 1e9 frames between "
                f"{mine[0][1]}x and {mine[-1][1]}x; linear extrapolation to {SWB_SP_FRAMES:.1e} "
                f"frames: {r0 + slope * (SWB_SP_FRAMES - f0):.0f} MiB, "
                f"{(w1 / f1) * SWB_SP_FRAMES / 60:.0f} min at the {mine[-1][1]}x rate."
            )
    publish(lines, args.publish)


if __name__ == "__main__":
    main()
