"""Lattice decoding against Kaldi's latgen-faster-mapped on the same scores and graph, and the
39-point sweep against one lattice pass.

Inputs: a graph dir (HCLG.fst, words.txt, phones/align_lexicon.int), its final.mdl and frames x
pdfs scores. ``--gmm-data DIR`` scores a data dir with the GMM final.mdl (the mini recipe's
mono system and test_mfcc: the default when recipes/mini has them, else the committed test
inputs, tests/decode/kaldi_expected). Each figure is a fresh process, one job, one thread:

- Kaldi: ``latgen-faster-mapped`` with steps/nnet3/decode.sh's options (beam 15, lattice beam 8,
  max-active 7000, acwt 0.1), its user CPU time;
- ours, one lattice pass: ``decode_data_dir`` with no sweep (the main text read off the
  lattices only): the CPU seconds of its job's scoring and search, and of the whole call
  (graph read, checks, outputs);
- ours, the sweep: the same with s5c's 39 points (LMWT 5..17 x WIP 0.0 0.5 1.0): the whole
  call's CPU seconds and those of the readings of the lattices.

CPU time, not wall time: the machines these run on are shared.

Our lattices are compared with Kaldi's by ``lattice-equivalent``, our 39 points' texts with
``lattice-scale | lattice-add-penalty | lattice-best-path`` on Kaldi's lattices.

    .venv/bin/python -m bench.lattice_decode [--kaldi-bin /opt/kaldi-lite/bin] [--utts N]
        [--graph DIR --mdl final.mdl (--gmm-data DIR | --loglikes ARK)] [--publish]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import subprocess
import sys
import tempfile
from pathlib import Path

import kaldiio

from bench.results import REPO, publish, publish_option, scrub

MINI = REPO / "recipes" / "mini"
EXPECTED = REPO / "tests" / "decode" / "kaldi_expected"

_DECODE = """
import json, sys, time
from asrdist.decode.decode_dir import decode_data_dir
from asrdist.decode.lattice import LatticeOptions
graph, mdl, data, scp, out, sweep = sys.argv[1:7]
t = time.process_time()
s = decode_data_dir(graph, data, out, trans_mdl=mdl, loglikes=scp,
                    lmwts=range(5, 18) if sweep == "1" else (),
                    wips=(0.0, 0.5, 1.0) if sweep == "1" else (0.0,))
print(json.dumps({"cpu": time.process_time() - t, "search": s.cpu_seconds,
                  "sweep": s.sweep_seconds, "audio": s.audio_seconds, "decoded": s.decoded}))
"""


def make_graph(work: Path) -> tuple[Path, Path]:
    """The mini recipe's graph (stage 5's command) from its lang, mono GMM and training text,
    made under ``work`` (the recipe's own exp/ is left alone)."""
    graph = work / "graph"
    subprocess.run([sys.executable, "-m", "asrdist.cli.mkgraph", "--lang", str(MINI / "data/lang"),
                    "--model", str(MINI / "exp/mono/final.mdl"), "--text",
                    str(MINI / "data/train/text"), "--order", "3", "--out", str(graph)],
                   check=True, capture_output=True)
    return graph, MINI / "exp/mono/final.mdl"


def gmm_scores(mdl: Path, data: Path, utts: int, ark: Path) -> None:
    """The GMM's log-likelihoods of the first ``utts`` utterances of ``data``, as an ark."""
    from asrdist.decode.acoustic import GmmScorer, list_utterances
    from asrdist.kaldi.final_mdl import read_am_diag_gmm

    scorer = GmmScorer(read_am_diag_gmm(mdl), data)
    names = list_utterances(data)[:utts]
    kaldiio.save_ark(str(ark), dict(scorer.scores(names)))


def inputs_dir(work: Path, ark: Path, num_pdfs: int) -> tuple[Path, Path]:
    """A data dir and an asrdist-compute-loglikes dir (scp, num_pdfs) holding ``ark``'s scores."""
    data, kept = work / "data", work / "loglikes"
    data.mkdir()
    kept.mkdir()
    scores = dict(kaldiio.load_ark(str(ark)))
    kaldiio.save_ark(str(kept / "loglikes.ark"), scores, scp=str(kept / "loglikes.scp"))
    (kept / "num_pdfs").write_text(f"{num_pdfs}\n")
    (data / "feats.scp").write_text("".join(f"{u} {kept / 'loglikes.ark'}:0\n" for u in scores))
    (data / "utt2spk").write_text("".join(f"{u} {u}\n" for u in scores))
    return data, kept / "loglikes.scp"


def kaldi_latgen(bin_dir: Path, graph: Path, mdl: Path, ark: Path, out: Path) -> float:
    """latgen-faster-mapped with decode.sh's options; its user + system CPU seconds."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([str(bin_dir / "latgen-faster-mapped"), "--minimize=false",
                    "--max-active=7000", "--min-active=200", "--beam=15.0", "--lattice-beam=8.0",
                    "--acoustic-scale=0.1", "--allow-partial=true", str(mdl),
                    str(graph / "HCLG.fst"), f"ark:{ark}", f"ark:{out}"],
                   check=True, capture_output=True, env={**os.environ, "OPENBLAS_NUM_THREADS": "1"})
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def kaldi_best_texts(bin_dir: Path, lats: Path, words: Path, lmwt: int, wip: float
                     ) -> dict[str, str]:
    """lattice-scale | lattice-add-penalty | lattice-best-path on Kaldi's lattices, as words."""
    scale = subprocess.run([str(bin_dir / "lattice-scale"), f"--inv-acoustic-scale={lmwt}",
                            f"ark:{lats}", "ark:-"], check=True, capture_output=True).stdout
    pen = subprocess.run([str(bin_dir / "lattice-add-penalty"), f"--word-ins-penalty={wip}",
                          "ark:-", "ark:-"], input=scale, check=True, capture_output=True).stdout
    best = subprocess.run([str(bin_dir / "lattice-best-path"), "ark:-", "ark,t:-"], input=pen,
                          check=True, capture_output=True).stdout.decode()
    id2word = {i: w for w, i in (line.split() for line in words.read_text().splitlines())}
    return {u: " ".join(id2word[i] for i in ids) for u, *ids in
            (line.split() for line in best.splitlines())}


def equivalent(bin_dir: Path, ours_gz: Path, kaldi: Path) -> str:
    """lattice-equivalent's count: 'E/N'."""
    log = subprocess.run([str(bin_dir / "lattice-equivalent"), f"ark:gunzip -c {ours_gz}|",
                          f"ark:{kaldi}"], capture_output=True, text=True).stderr
    done = re.search(r"Done (\d+) lattices, (\d+) were equivalent", log)
    return f"{done.group(2)}/{done.group(1)}" if done else "?"


def sweep_agreement(bin_dir: Path, kaldi: Path, words: Path, decode: Path) -> tuple[int, int]:
    """Utterance x point transcripts of our score_*/text equal to Kaldi's, and their number."""
    same = total = 0
    for lmwt in range(5, 18):
        for wip in (0.0, 0.5, 1.0):
            theirs = kaldi_best_texts(bin_dir, kaldi, words, lmwt, wip)
            mine = dict((line.split(" ", 1) + [""])[:2] for line in
                        (decode / f"score_{lmwt}_{wip:.1f}" / "text").read_text().splitlines())
            same += sum(mine.get(u) == w for u, w in theirs.items())
            total += len(theirs)
    return same, total


def ours(graph: Path, mdl: Path, data: Path, scp: Path, out: Path, sweep: bool) -> dict:
    """One decode_data_dir run in a fresh process (one job): its figures."""
    proc = subprocess.run([sys.executable, "-c", _DECODE, str(graph), str(mdl), str(data),
                           str(scp), str(out), "1" if sweep else "0"],
                          cwd=REPO, capture_output=True, text=True,
                          env={**os.environ, "OMP_NUM_THREADS": "1"})
    if proc.returncode:
        raise SystemExit(proc.stderr[-3000:])
    return json.loads(proc.stdout.splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kaldi-bin", type=Path, default=Path("/opt/kaldi-lite/bin"))
    ap.add_argument("--graph", type=Path, default=None)
    ap.add_argument("--mdl", type=Path, default=None)
    ap.add_argument("--gmm-data", type=Path, default=None)
    ap.add_argument("--loglikes", type=Path, default=None)
    ap.add_argument("--utts", type=int, default=40)
    publish_option(ap, __file__)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        ark = work / "scores.ark"
        if args.graph is None and (MINI / "exp/mono/final.mdl").is_file() \
                and (MINI / "data/test_mfcc/feats.scp").is_file():
            args.graph, args.mdl = make_graph(work)
            args.gmm_data = MINI / "data/test_mfcc"
            source = "the mini recipe's mono GMM scores of data/test_mfcc, its trigram graph"
        elif args.graph is None:
            args.graph, args.mdl, args.loglikes = EXPECTED, EXPECTED / "final.mdl", \
                EXPECTED / "loglikes.ark"
            source = "the committed test inputs (tests/decode/kaldi_expected)"
        else:
            source = f"graph {args.graph}"
        if args.gmm_data is not None:
            gmm_scores(args.mdl, args.gmm_data, args.utts, ark)
        else:
            kaldiio.save_ark(str(ark), dict(list(kaldiio.load_ark(str(args.loglikes)))[
                :args.utts]))
        num_pdfs = next(iter(kaldiio.load_ark(str(ark))))[1].shape[1]
        data, scp = inputs_dir(work, ark, num_pdfs)
        kaldi_cpu = kaldi_latgen(args.kaldi_bin, args.graph, args.mdl, ark, work / "kaldi.lat")
        one = ours(args.graph, args.mdl, data, scp, work / "one", sweep=False)
        full = ours(args.graph, args.mdl, data, scp, work / "sweep", sweep=True)
        same_lats = equivalent(args.kaldi_bin, work / "one" / "lat.1.gz", work / "kaldi.lat")
        same, total = sweep_agreement(args.kaldi_bin, work / "kaldi.lat",
                                      args.graph / "words.txt", work / "sweep")
        graph_mb = (args.graph / "HCLG.fst").stat().st_size / 1e6
        lines = [
            "## Lattice decoding against latgen-faster-mapped; the sweep against one pass", "",
            f"Command: `.venv/bin/python -m bench.lattice_decode {' '.join(sys.argv[1:])}`. "
            f"Inputs: {source}; HCLG.fst {graph_mb:.1f} MB; {one['decoded']} utterances, "
            f"{one['audio']:.1f} s of audio. One job, one thread each; CPU seconds (user + "
            "system), the machine shared with other jobs.", "",
            "| what | CPU seconds | RTF per core |", "|---|---|---|",
            f"| Kaldi latgen-faster-mapped (user+sys CPU) | {kaldi_cpu:.2f} | "
            f"{kaldi_cpu / one['audio']:.4f} |",
            f"| ours, lattice search (scores read, search, determinization) | "
            f"{one['search']:.2f} | {one['search'] / one['audio']:.4f} |",
            f"| ours, one lattice pass, the whole decode_data_dir call | {one['cpu']:.2f} | "
            f"{one['cpu'] / one['audio']:.4f} |",
            f"| ours, with the 39-point sweep, the whole call | {full['cpu']:.2f} | "
            f"{full['cpu'] / one['audio']:.4f} |",
            f"| of which the 40 readings of the lattices | {full['sweep']:.2f} | "
            f"{full['sweep'] / one['audio']:.4f} |", "",
            f"Ours / Kaldi, lattice search: {one['search'] / kaldi_cpu:.1f}x. Pass + 39-point "
            f"sweep / one pass (CPU of the whole call): {full['cpu'] / one['cpu']:.2f}x. "
            f"Lattices equivalent to Kaldi's (lattice-equivalent): {same_lats}. Sweep "
            f"transcripts (utterances x 39 points) equal to lattice-scale | lattice-add-penalty "
            f"| lattice-best-path on Kaldi's lattices: {same}/{total}.",
        ]
        publish(scrub(lines, {work: "TMP"}), args.publish)


if __name__ == "__main__":
    main()
