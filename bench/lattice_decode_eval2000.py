"""Lattice decoding at eval2000's size (4459 segments, ~3.7 h) against Kaldi's
latgen-faster-mapped, split into ``--nj`` jobs as a lab splits a test set; the 39-point
sweep and one 4-gram rescoring against one lattice pass; peak memory per job; disk per hour
of speech for the lattices and for kept scores.

The test set is the SIZE of eval2000, not its acoustics: the mini recipe's test set
(recipes/mini: data/test_mfcc scored by its mono GMM, exp/mono/final.mdl, as
bench.lattice_decode does) is only ~20 min of 318 utterances of 3.8 s on average, longer than
eval2000's 3.0 s, so its k shortest utterances (the smallest k whose copies reach ``--hours``)
are tiled under new ids (``c<copy>-<utt>``) until there are ``--segments`` of them. The graph
is the recipe's trigram HCLG (exp/graph, 14.5 MB), not a gigabyte one (bench.graph_read
measures reading that). Every job is a fresh process, run ``--nj`` at a time:

- Kaldi: ``latgen-faster-mapped`` with steps/nnet3/decode.sh's options on the job's scores
  (an ark, float32), its CPU seconds and peak RSS (its rusage, taken by a small launcher
  process so that nothing of this one's memory is counted);
- ours, one lattice pass: ``decode_data_dir(nj=1)`` on the job's data dir with the scores
  kept as asrdist-compute-loglikes keeps them (loglikes.scp), no sweep: CPU seconds of the
  search (scores read, search, determinization) and of the whole call, peak RSS (VmHWM);
- the sweep: s5c's 39 points (LMWT 5..17 x WIP 0.0 0.5 1.0) read off the pass's lattices
  (``write_readings``: texts and CTMs of every point, what decode_data_dir's sweep writes,
  the lattices read back from lat.N.gz besides), one fresh process per job;
- one 4-gram rescoring of the pass's lattices as asrdist-lmrescore does it
  (``rescore_decode_dir`` + ``read_rescored_dir`` with the 39 points): a 4-gram estimated
  (interpolated Kneser-Ney, asrdist.decode.lm) from the mini recipe's training text, the old
  LM the graph's G.fst.

Each phase's figures are kept in the work dir (``<phase>.json``); a rerun with the same
``--work`` reuses them and runs only the phases without one.

Disk: our lat.N.gz, Kaldi's lattices gzipped as decode.sh pipes them, and the kept scores at
float32 and Kaldi's compressed matrices (2byte, 1byte: asrdist-compute-loglikes --compress),
the compressed sizes measured on each distinct utterance once and summed over its copies.

    .venv/bin/python -m bench.lattice_decode_eval2000 [--nj 2] [--segments 4459] [--hours 3.7]
        [--kaldi-bin /opt/kaldi-lite/bin] [--work DIR] [--publish]

Takes tens of minutes of CPU: run it with nice, in the background.
"""

from __future__ import annotations

import argparse
import gzip
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import kaldiio
import numpy as np

from asrdist.decode.loglikes import COMPRESSION
from asrdist.jobs import deal
from asrdist.kaldi.data_dir import read_symbols
from bench.lattice_decode import kaldi_best_texts
from bench.results import REPO, publish, publish_option, scrub

MINI = REPO / "recipes" / "mini"
LATGEN_OPTS = ["--minimize=false", "--max-active=7000", "--min-active=200", "--beam=15.0",
               "--lattice-beam=8.0", "--acoustic-scale=0.1", "--allow-partial=true"]

_PEAK = """
def peak_mb():
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
"""

LAUNCH = """
import json, os, resource, subprocess, sys, time
t = time.perf_counter()
proc = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
if proc.returncode:
    sys.exit(proc.stderr.decode()[-3000:])
r = resource.getrusage(resource.RUSAGE_CHILDREN)
print(json.dumps({"cpu": r.ru_utime + r.ru_stime, "rss_mb": r.ru_maxrss / 1024,
                  "wall": time.perf_counter() - t}))
"""

_DECODE = _PEAK + """
import json, sys, time
from asrdist.decode.decode_dir import S5C_LMWTS, S5C_WIPS, decode_data_dir
graph, mdl, data, scp, out, sweep = sys.argv[1:7]
t, w = time.process_time(), time.perf_counter()
s = decode_data_dir(graph, data, out, trans_mdl=mdl, loglikes=scp,
                    lmwts=S5C_LMWTS if sweep == "1" else (),
                    wips=S5C_WIPS if sweep == "1" else (0.0,))
print(json.dumps({"cpu": time.process_time() - t, "wall": time.perf_counter() - w,
                  "search": s.cpu_seconds, "sweep": s.sweep_seconds, "audio": s.audio_seconds,
                  "decoded": s.decoded, "partial": s.partial, "failed": s.failed,
                  "rss_mb": peak_mb()}))
"""

_READINGS = _PEAK + """
import json, sys, time
from asrdist.decode.decode_dir import S5C_LMWTS, S5C_WIPS
from asrdist.decode.lattice_readings import write_readings
from asrdist.decode.lmrescore import iter_lattice_archive
lats, data, out, words, mdl, lexicon = sys.argv[1:7]
t, w = time.process_time(), time.perf_counter()
write_readings(out, iter_lattice_archive(lats), data, words, mdl, lexicon, S5C_LMWTS,
               S5C_WIPS)
print(json.dumps({"cpu": time.process_time() - t, "wall": time.perf_counter() - w,
                  "rss_mb": peak_mb()}))
"""

_RESCORE = _PEAK + """
import json, sys, time
from asrdist.decode.decode_dir import S5C_LMWTS, S5C_WIPS
from asrdist.decode.lmrescore_dir import read_rescored_dir, rescore_decode_dir
lang, arpa, data, src, out, mdl = sys.argv[1:7]
t, w = time.process_time(), time.perf_counter()
done = rescore_decode_dir(lang, arpa, src, out, nj=1)
read_rescored_dir(lang, data, src, out, mdl, S5C_LMWTS, S5C_WIPS)
print(json.dumps({"cpu": time.process_time() - t, "wall": time.perf_counter() - w,
                  "kept": sum(r.done for r in done), "rss_mb": peak_mb()}))
"""


def parallel(code: str, argsets: list[list[object]], env: dict[str, str] | None = None
             ) -> tuple[list[dict], float]:
    """``python -c code *args`` for every args of ``argsets``, all at once (fresh processes, one
    thread each); what each printed last, as JSON, and the wall seconds until the last ended."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1",
           "OPENBLAS_NUM_THREADS": "1", **(env or {})}
    start = time.perf_counter()
    procs = [subprocess.Popen([sys.executable, "-c", code, *map(str, args)], cwd=REPO, env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for args in argsets]
    outs = [p.communicate() for p in procs]
    wall = time.perf_counter() - start
    for p, (_, err) in zip(procs, outs, strict=True):
        if p.returncode:
            raise SystemExit(err[-3000:])
    return [json.loads(out.strip().splitlines()[-1]) for out, _ in outs], wall


def phase(work: Path, name: str, code: str, argsets: list[list[object]]) -> dict:
    """:func:`parallel`'s figures as {"jobs": [...], "wall": s}, kept as ``work/<name>.json``
    and reused from there when a run already made them."""
    kept = work / f"{name}.json"
    if kept.is_file():
        return json.loads(kept.read_text())
    jobs, wall = parallel(code, argsets)
    figures = {"jobs": jobs, "wall": wall}
    kept.write_text(json.dumps(figures))
    print(f"{name}: {wall:.0f} s", file=sys.stderr, flush=True)
    return figures


def tiled(frames: dict[str, int], segments: int, hours: float, shift: float
          ) -> list[tuple[str, str]]:
    """(new id, utterance) of ``segments`` copies of the k shortest utterances, cycled, k the
    smallest whose copies reach ``hours`` (all of them when none does), C-sorted by new id."""
    if segments < 1 or hours <= 0:
        raise SystemExit("--segments and --hours must be positive")
    order = sorted(frames, key=lambda u: (frames[u], u))
    k = len(order)
    for k in range(1, len(order) + 1):
        if sum(frames[order[i % k]] for i in range(segments)) * shift >= hours * 3600:
            break
    pairs = [(f"c{i // k:03d}-{order[i % k]}", order[i % k]) for i in range(segments)]
    return sorted(pairs, key=lambda p: p[0].encode())


def write_job(work: Path, n: int, pairs: list[tuple[str, str]], scores: dict[str, np.ndarray],
              num_pdfs: int) -> tuple[Path, Path, Path]:
    """Job ``n``'s scores (ark + scp, asrdist-compute-loglikes' layout) and its data dir."""
    kept, data = work / f"loglikes.{n}", work / f"data.{n}"
    ark = kept / "loglikes.ark"
    if (data / "frame_shift").is_file():  # written last: a run before made them
        return ark, kept / "loglikes.scp", data
    kept.mkdir(exist_ok=True)
    data.mkdir(exist_ok=True)
    with kaldiio.WriteHelper(f"ark,scp:{ark},{kept / 'loglikes.scp'}") as writer:
        for new, utt in pairs:
            writer(new, scores[utt])
    (kept / "num_pdfs").write_text(f"{num_pdfs}\n")
    (data / "feats.scp").write_text("".join(f"{new} {ark}:0\n" for new, _ in pairs))
    (data / "utt2spk").write_text("".join(f"{new} {new}\n" for new, _ in pairs))
    (data / "frame_shift").write_text("0.01\n")
    return ark, kept / "loglikes.scp", data


def compressed_bytes(scores: dict[str, np.ndarray], copies: dict[str, int], method: int | None
                     ) -> int:
    """Bytes of an ark holding each utterance ``copies[utt]`` times at ``method``
    (kaldiio's Kaldi compression; None: float32), each distinct matrix written once."""
    total = 0
    for utt, n in copies.items():
        buf = io.BytesIO()
        kaldiio.save_ark(buf, {utt: scores[utt]}, compression_method=method)
        total += n * len(buf.getvalue())
    return total


def rescoring_lang(work: Path, graph: Path) -> tuple[Path, Path]:
    """OLD_LANG (the graph's G.fst, words.txt, the recipe's oov.int, align_lexicon.int) and a
    4-gram ARPA estimated from the recipe's training text."""
    from asrdist.decode.lm import NgramLM, read_training_text

    lang = work / "lang_tg"
    (lang / "phones").mkdir(parents=True, exist_ok=True)
    for name in ("G.fst", "words.txt", "phones/align_lexicon.int"):
        shutil.copy(graph / name, lang / name)
    shutil.copy(MINI / "data/lang/oov.int", lang / "oov.int")
    words = read_symbols(graph / "words.txt")
    oov = {i: w for w, i in words.items()}[int((lang / "oov.int").read_text().split()[0])]
    vocab = {w for w in words if w not in ("<eps>", "<s>", "</s>") and not w.startswith("#")}
    lm = NgramLM(read_training_text(MINI / "data/train/text", vocab, oov), vocab, order=4)
    lm.write_arpa(work / "fg.arpa")
    return lang, work / "fg.arpa"


def best_texts(bin_dir: Path, lats: list[Path], words: Path) -> dict[str, str]:
    """Kaldi's main text of each lattice archive: LMWT 10 (1/acwt), no penalty."""
    return {u: text for lat in lats for u, text in
            kaldi_best_texts(bin_dir, lat, words, 10, 0.0).items()}


def shown_args() -> str:
    """This run's arguments without --work and its folder (a scratch path of one machine)."""
    argv, shown = sys.argv[1:], []
    while argv:
        a = argv.pop(0)
        if a == "--work":
            argv = argv[1:]
        elif not a.startswith("--work="):
            shown.append(a)
    return " ".join(shown)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kaldi-bin", type=Path, default=Path("/opt/kaldi-lite/bin"))
    ap.add_argument("--nj", type=int, default=2)
    ap.add_argument("--segments", type=int, default=4459)
    ap.add_argument("--hours", type=float, default=3.7)
    ap.add_argument("--work", type=Path, default=None, help="scratch dir, kept (default: a "
                    "temporary one, removed)")
    publish_option(ap, __file__)
    args = ap.parse_args()
    if args.nj < 1:
        raise SystemExit(f"--nj {args.nj}: must be at least 1")
    graph, mdl, test = MINI / "exp/graph", MINI / "exp/mono/final.mdl", MINI / "data/test_mfcc"
    for need in (graph / "HCLG.fst", mdl, test / "feats.scp", args.kaldi_bin / "latgen-faster-"
                 "mapped"):
        if not need.exists():
            raise SystemExit(f"{need}: missing (build the mini recipe through its graph, and "
                             "Kaldi's binaries: --kaldi-bin)")
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp) if args.work is None else args.work
        work.mkdir(parents=True, exist_ok=True)
        t0 = time.perf_counter()
        from asrdist.decode.acoustic import GmmScorer, list_utterances
        from asrdist.kaldi.final_mdl import read_am_diag_gmm

        scorer = GmmScorer(read_am_diag_gmm(mdl), test)
        scores = dict(scorer.scores(list_utterances(test)))
        pairs = tiled({u: m.shape[0] for u, m in scores.items()}, args.segments, args.hours,
                      0.01)
        copies: dict[str, int] = {}
        for _, utt in pairs:
            copies[utt] = copies.get(utt, 0) + 1
        audio = sum(scores[u].shape[0] for _, u in pairs) * 0.01
        num_pdfs = next(iter(scores.values())).shape[1]
        jobs = [write_job(work, n, part, scores, num_pdfs)
                for n, part in enumerate(deal(pairs, args.nj), 1)]
        lang, arpa = rescoring_lang(work, graph)
        if (work / "disk.json").is_file():
            disk = json.loads((work / "disk.json").read_text())
        else:
            disk = {name: compressed_bytes(scores, copies, COMPRESSION[name])
                    for name in ("2byte", "1byte")}
            disk["none"] = sum(ark.stat().st_size for ark, _, _ in jobs)
            (work / "disk.json").write_text(json.dumps(disk))
        del scores
        prepared = time.perf_counter() - t0
        print(f"prepared in {prepared:.0f} s: {len(pairs)} segments, {audio / 3600:.2f} h, "
              f"{len(copies)} distinct", file=sys.stderr, flush=True)

        kaldi = phase(work, "kaldi", LAUNCH, [
            [args.kaldi_bin / "latgen-faster-mapped", *LATGEN_OPTS, mdl, graph / "HCLG.fst",
             f"ark:{ark}", f"ark:{work / f'kaldi.{n}.lat'}"]
            for n, (ark, _, _) in enumerate(jobs, 1)])
        one = phase(work, "one", _DECODE, [[graph, mdl, data, scp, work / f"one.{n}", 0]
                                          for n, (_, scp, data) in enumerate(jobs, 1)])
        sweep = phase(work, "sweep", _READINGS, [
            [work / f"one.{n}" / "lat.1.gz", data, work / f"sweep.{n}", graph / "words.txt",
             mdl, graph / "phones/align_lexicon.int"] for n, (_, _, data) in enumerate(jobs, 1)])
        fg = phase(work, "fg", _RESCORE, [[lang, arpa, data, work / f"one.{n}",
                                          work / f"fg.{n}", mdl]
                                         for n, (_, _, data) in enumerate(jobs, 1)])

        kaldi_lats = [work / f"kaldi.{n}.lat" for n in range(1, len(jobs) + 1)]
        theirs = best_texts(args.kaldi_bin, kaldi_lats, graph / "words.txt")
        mine = {}
        for n in range(1, len(jobs) + 1):
            mine.update((line.split(" ", 1) + [""])[:2] for line in
                        (work / f"one.{n}" / "text").read_text().splitlines())
        same = sum(mine.get(u) == w for u, w in theirs.items())
        lat_gz = sum((work / f"one.{n}" / "lat.1.gz").stat().st_size
                     for n in range(1, len(jobs) + 1))
        kaldi_gz = sum(len(gzip.compress(p.read_bytes(), 6)) for p in kaldi_lats)
    hours = audio / 3600
    k_cpu = sum(j["cpu"] for j in kaldi["jobs"])
    search = sum(j["search"] for j in one["jobs"])
    one_cpu = sum(j["cpu"] for j in one["jobs"])
    sweep_cpu = sum(j["cpu"] for j in sweep["jobs"])
    fg_cpu = sum(j["cpu"] for j in fg["jobs"])
    distinct = sorted(copies.values())

    def row(what: str, cpu: float, figures: dict) -> str:
        return (f"| {what} | {cpu:.0f} | {cpu / audio:.4f} | {figures['wall']:.0f} | "
                + " / ".join(f"{j['rss_mb']:.0f}" for j in figures["jobs"]) + " |")

    lines = [
        "## Lattice decoding at eval2000's size against latgen-faster-mapped", "",
        f"Command: `nice .venv/bin/python -m bench.lattice_decode_eval2000 {shown_args()}`. "
        f"{time.strftime('%Y-%m-%d', time.gmtime())}, {os.cpu_count()} CPU cores shared with "
        "other jobs (CPU seconds are the figure to read; wall times are contended).", "",
        f"Test set: {len(pairs)} segments, {hours:.2f} h of audio: the {len(copies)} shortest "
        f"utterances of the mini recipe's test set (each {distinct[0]} to {distinct[-1]} "
        "times), "
        "scored by its mono GMM (181 pdfs): eval2000's size, not its acoustics. Graph: the "
        f"mini trigram HCLG.fst. {args.nj} jobs (utterances dealt as asrdist-decode deals "
        "them), run at once, each a fresh process, one thread.", "",
        "| what | CPU seconds (all jobs) | RTF per core | wall (s) | peak RSS per job (MiB) |",
        "|---|---|---|---|---|",
        row("Kaldi latgen-faster-mapped", k_cpu, kaldi),
        row("ours, lattice search (scores read, search, determinization)", search, one),
        row("ours, one lattice pass, the whole decode_data_dir call", one_cpu, one),
        row("the 39-point sweep read off the pass's lattices (texts, CTMs)", sweep_cpu, sweep),
        row("one 4-gram rescoring of those lattices + its 39-point sweep", fg_cpu, fg), "",
        f"- Ours / Kaldi, the lattice search: **{search / k_cpu:.2f}x** CPU (the whole call: "
        f"{one_cpu / k_cpu:.2f}x); goal 1.5x.",
        f"- Pass + 39-point sweep + one 4-gram rescoring (and its sweep) / one lattice pass: "
        f"**{(one_cpu + sweep_cpu + fg_cpu) / one_cpu:.2f}x** CPU, "
        f"{(one['wall'] + sweep['wall'] + fg['wall']) / one['wall']:.2f}x wall; goal 1.3x.",
        f"- Decoded {sum(j['decoded'] for j in one['jobs'])}/{len(pairs)} "
        f"({sum(j['partial'] for j in one['jobs'])} partial, "
        f"{sum(j['failed'] for j in one['jobs'])} failed); main texts (LMWT 10, WIP 0) equal "
        f"to lattice-scale --inv-acoustic-scale=10 | lattice-best-path on Kaldi's lattices: "
        f"{same}/{len(theirs)}.",
        f"- Disk per hour of speech: our lat.N.gz {lat_gz / 1e6 / hours:.1f} MB "
        f"(Kaldi's lattices, gzipped: {kaldi_gz / 1e6 / hours:.1f} MB); kept scores at "
        f"{num_pdfs} pdfs: float32 {disk['none'] / 1e6 / hours:.0f} MB, 2byte "
        f"{disk['2byte'] / 1e6 / hours:.0f} MB, 1byte {disk['1byte'] / 1e6 / hours:.0f} MB "
        f"(bytes per pdf per frame: {disk['none'] / (audio * 100 * num_pdfs):.2f} / "
        f"{disk['2byte'] / (audio * 100 * num_pdfs):.2f} / "
        f"{disk['1byte'] / (audio * 100 * num_pdfs):.2f}).",
    ]
    publish(scrub(lines, {}), args.publish)


if __name__ == "__main__":
    main()
