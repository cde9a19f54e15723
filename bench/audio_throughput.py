"""Audio throughput of asrdist-features on Switchboard-like data: SPHERE decode + 40-dim fbank,
in x real time per core (seconds of utterance audio made into features / CPU seconds, 1 job).

The data is made here: two-channel 8 kHz conversations (turns of harmonic "voiced" sound with
a syllable envelope over line noise, each side silent while the other talks), mu-law and
shorten-compressed as the LDC ships Switchboard (the fixture's writer,
asrdist/testing/sphere_writer.py); segments of 4-6 s covering each side, as Kaldi ids; and
wav.scp as Kaldi writes it (s5c's ``sph2pipe -f wav -p -c N FILE |``, with
perturb_data_dir_speed.sh's ``| sox -t wav - -t wav - speed F |`` for the 0.9 and 1.1 copies),
its sph2pipe not installed, so asrdist reads the pipes in-process. Rows, each make_features
with nj=1 in a fresh process, CPU time of the process and its children:

- desphere-native, each file decoded once for both sides and every speed (this tree);
- the same with desphere-native unimportable: pure-Python desphere (``--python-conversations``
  of the files, it is slow);
- the per-side, per-speed path of ``--old-ref`` (a git ref; the features code before the
  decode-once change): wav.scp as asrdist's route 2 wrote it, one ``asrdist-sph2wav -c N
  --speed F FILE |`` process per side and speed, each decoding the whole file.

Then where the time of the first row goes, timed piece by piece in this process.

    .venv/bin/python -m bench.audio_throughput --publish
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import kaldiio
import numpy as np
import torch

from asrdist.data.features import FeatureOptions, compute_features, make_extractor
from asrdist.kaldi.data_dir import c_sorted, read_table
from asrdist.kaldi.segments import segment_samples
from asrdist.kaldi.sphere import change_speed, read_sphere, sphere_channel
from asrdist.testing.sphere_writer import write_sphere
from bench.harness import commit_of, extract, fresh_process
from bench.results import REPO, publish, publish_option

RATE = 8000
SPEEDS = (0.9, 1.0, 1.1)
OPTIONS = FeatureOptions("fbank", num_mel_bins=40, sample_rate=RATE)
WORKER = """
import json, resource, sys, time
from asrdist.data.features import FeatureOptions, make_features
def cpu():
    s, c = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return s.ru_utime + s.ru_stime + c.ru_utime + c.ru_stime
c0, w0 = cpu(), time.perf_counter()
make_features(sys.argv[1], sys.argv[2], FeatureOptions("fbank", 40, sample_rate=8000), nj=1)
# VmHWM, not ru_maxrss: Linux carries ru_maxrss over from the parent across exec
hwm = next(line for line in open("/proc/self/status") if line.startswith("VmHWM:"))
print(json.dumps({"cpu": cpu() - c0, "wall": time.perf_counter() - w0,
                  "rss_mb": int(hwm.split()[1]) / 1024}))
"""
NO_NATIVE = "import sys; sys.modules['desphere_native'] = None\n"


def conversation(rng: np.random.Generator, seconds: float) -> np.ndarray:
    """(samples, 2) int16: two sides taking turns of 1-10 s over telephone line noise."""
    n = int(seconds * RATE)
    out = rng.normal(0, 40, (n, 2))
    t, side = 0.0, 0
    while t < seconds:
        turn = min(rng.uniform(1, 10), seconds - t)
        a, m = int(t * RATE), int(turn * RATE)
        time_s = np.arange(m) / RATE
        f0 = rng.uniform(90, 230) * (1 + 0.15 * np.sin(2 * np.pi * rng.uniform(0.2, 1) * time_s))
        phase = 2 * np.pi * np.cumsum(f0) / RATE
        voiced = sum(np.sin(k * phase) / k for k in range(1, 16))
        envelope = np.abs(np.sin(2 * np.pi * rng.uniform(3, 5) * time_s)) ** 0.7
        level = rng.uniform(1500, 5000)
        out[a:a + m, side] += level * envelope * (voiced + rng.normal(0, 0.3, m))
        t += turn + rng.uniform(0, 0.6)
        side = 1 - side
    return np.clip(out, -32768, 32767).astype(np.int16)


def make_corpus(root: Path, conversations: int, minutes: float, seed: int) -> dict[str, Path]:
    """``conversations`` SPHERE files of ``minutes`` each under ``root``; {conv id: path}."""
    rng = np.random.default_rng(seed)
    files = {}
    for i in range(conversations):
        conv = f"sw0{2001 + i}"
        files[conv] = root / "swb1_d1" / "data" / f"{conv}.sph"
        write_sphere(files[conv], conversation(rng, minutes * 60))
    return files


def write_data_dir(dest: Path, files: dict[str, Path], seconds: float, seed: int,
                   pipe: Callable[[Path, int, float], str]) -> float:
    """A Kaldi data dir of 4-6 s segments covering both sides of ``files`` at every speed;
    ``pipe(sph, channel, speed)`` is a recording's wav.scp value. Returns the seconds of
    utterance audio in it."""
    rng = np.random.default_rng(seed)
    wav, segments, utt2spk = [], [], []
    total = 0.0
    for conv, sph in files.items():
        for channel, side in ((1, "A"), (2, "B")):
            cuts, t = [], 0.0
            while t + 1 < seconds:
                end = min(t + rng.uniform(4, 6), seconds)
                cuts.append((t, end))
                t = end + rng.uniform(0.1, 0.5)
            for speed in SPEEDS:
                prefix = f"sp{speed:g}-" if speed != 1.0 else ""
                reco = f"{prefix}{conv}-{side}"
                wav.append(f"{reco} {pipe(sph, channel, speed)}")
                for start, end in cuts:
                    utt = f"{prefix}{conv}-{side}_{int(start * 100):06d}-{int(end * 100):06d}"
                    s, e = start / speed, end / speed  # perturb_data_dir_speed.sh:97
                    segments.append(f"{utt} {reco} {s:.2f} {e:.2f}")
                    utt2spk.append(f"{utt} {prefix}{conv}-{side}")
                    total += float(f"{e:.2f}") - float(f"{s:.2f}")
    dest.mkdir(parents=True)
    spk2utt: dict[str, list[str]] = {}
    for line in sorted(utt2spk):
        utt, spk = line.split()
        spk2utt.setdefault(spk, []).append(utt)
    tables = {"wav.scp": wav, "segments": segments, "utt2spk": utt2spk,
              "text": [f"{line.split()[0]} uh-huh" for line in segments],
              "spk2utt": [" ".join([s, *u]) for s, u in spk2utt.items()]}
    for name, lines in tables.items():
        (dest / name).write_text("".join(f"{line}\n" for line in c_sorted(lines)))
    return total


def kaldi_pipe(sph2pipe: Path) -> Callable[[Path, int, float], str]:
    """wav.scp values as s5c's swbd1_data_prep.sh:111-114 writes them, with
    perturb_data_dir_speed.sh:102's sox stage for a speed other than 1."""
    def value(sph: Path, channel: int, speed: float) -> str:
        sox = f" sox -t wav - -t wav - speed {speed:g} |" if speed != 1.0 else ""
        return f"{sph2pipe} -f wav -p -c {channel} {sph} |{sox}"
    return value


def sph2wav_pipe(sph: Path, channel: int, speed: float) -> str:
    """wav.scp values as the route-2 data prep wrote them before (asrdist-sph2wav by module:
    the console script on PATH may be another tree's)."""
    return (f"{sys.executable} -c 'from asrdist.cli.sph2wav import main; main()' "
            f"-c {channel} --speed {speed:g} {sph} |")


def run_row(tree: Path, src: Path, dest: Path, prefix: str = "") -> dict:
    """make_features(src, dest) with nj=1 in a fresh process with ``tree`` first on its path."""
    return fresh_process(prefix + WORKER, src, dest, tree=tree)


def breakdown(src: Path, files: dict[str, Path]) -> dict[str, float]:
    """CPU seconds of the first row's pieces, each timed on its own in this process (1 thread):
    decoding, the speed copies, cutting + fbank."""
    torch.set_num_threads(1)
    extractor = make_extractor(OPTIONS)
    segments = read_table(src / "segments")
    by_reco: dict[str, list[tuple[float, float]]] = {}
    for rest in segments.values():
        reco, s, e = rest.split()
        by_reco.setdefault(reco, []).append((float(s), float(e)))
    cpu = {"decode": 0.0, "speed copies": 0.0, "fbank": 0.0}
    for conv, sph in files.items():
        t = time.process_time()
        samples, _ = read_sphere(sph)
        cpu["decode"] += time.process_time() - t
        for channel, side in ((1, "A"), (2, "B")):
            for speed in SPEEDS:
                t = time.process_time()
                mono = sphere_channel(sph, samples, channel)
                mono = change_speed(mono, speed) if speed != 1.0 else mono
                cpu["speed copies"] += time.process_time() - t
                prefix = f"sp{speed:g}-" if speed != 1.0 else ""
                t = time.process_time()
                for s, e in by_reco[f"{prefix}{conv}-{side}"]:
                    cut = segment_samples(s, e, mono.size, RATE)
                    if not isinstance(cut, str):
                        compute_features(mono[cut[0]:cut[1]], extractor, RATE)
                cpu["fbank"] += time.process_time() - t
    return cpu


def same_features(a: Path, b: Path) -> bool:
    fa, fb = kaldiio.load_scp(str(a / "feats.scp")), kaldiio.load_scp(str(b / "feats.scp"))
    return list(fa) == list(fb) and all(np.array_equal(fa[u], fb[u]) for u in fa)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--conversations", type=int, default=4)
    parser.add_argument("--minutes", type=float, default=5.0, help="length of each")
    parser.add_argument("--python-conversations", type=int, default=1,
                        help="how many of them the pure-Python desphere row decodes")
    parser.add_argument("--old-ref", default="", help="git ref of the per-side/per-speed path "
                        "(e.g. the commit before the decode-once change); none: no such row")
    parser.add_argument("--seed", type=int, default=0)
    publish_option(parser, __file__)
    args = parser.parse_args()
    seconds = args.minutes * 60
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        t = time.perf_counter()
        files = make_corpus(work / "LDC97S62", args.conversations, args.minutes, args.seed)
        made_s = time.perf_counter() - t
        ratio = 2 * RATE * seconds * len(files) / sum(f.stat().st_size for f in files.values())
        pipe = kaldi_pipe(work / "kaldi" / "tools" / "sph2pipe_v2.5" / "sph2pipe")  # absent
        audio = write_data_dir(work / "kaldi_src", files, seconds, args.seed, pipe)
        rows = []
        native = run_row(REPO, work / "kaldi_src", work / "native")
        rows.append(("desphere-native, each file decoded once (in-process sph2pipe pipes)",
                     args.conversations, audio, native))
        few = dict(list(files.items())[:args.python_conversations])
        few_audio = write_data_dir(work / "kaldi_few", few, seconds, args.seed, pipe)
        pure = run_row(REPO, work / "kaldi_few", work / "pure", NO_NATIVE)
        rows.append(("pure-Python desphere, each file decoded once", len(few), few_audio, pure))
        checks = []
        if args.old_ref:
            commit = commit_of(args.old_ref)
            tree = extract(commit, work / "old")
            write_data_dir(work / "old_src", files, seconds, args.seed, sph2wav_pipe)
            old = run_row(tree, work / "old_src", work / "old")
            rows.append((f"{commit}: one asrdist-sph2wav process per side and speed "
                         "(desphere-native inside)", args.conversations, audio, old))
            checks.append(f"features of the old path equal the new: "
                          f"{same_features(work / 'native', work / 'old')}")
        pieces = breakdown(work / "kaldi_src", files)
    head = ["| path | conversations | utterance audio (s) | CPU s | wall s | x real time per "
            "core | peak RSS (MB) |", "|---|---|---|---|---|---|---|"]
    table = [f"| {name} | {n} | {a:.0f} | {r['cpu']:.2f} | {r['wall']:.2f} | "
             f"{a / r['cpu']:.0f} | {r['rss_mb']:.0f} |" for name, n, a, r in rows]
    rest = native["cpu"] - sum(pieces.values())
    split = ["| piece | CPU s | share | x real time of the utterance audio |", "|---|---|---|---|",
             *(f"| {k} | {v:.2f} | {100 * v / native['cpu']:.0f} % | {audio / v:.0f} |"
               for k, v in pieces.items()),
             f"| the rest (ark/scp writing, CMVN stats, tables, process) | {rest:.2f} | "
             f"{100 * rest / native['cpu']:.0f} % | |"]
    command = (f".venv/bin/python -m bench.audio_throughput --conversations "
               f"{args.conversations} --minutes {args.minutes:g} --python-conversations "
               f"{args.python_conversations}" + (f" --old-ref {args.old_ref}" if args.old_ref
                                                  else ""))
    publish([
        "## Audio throughput: SPHERE decode + fbank (asrdist-features)",
        "",
        f"{args.conversations} generated two-channel 8 kHz mu-law shorten SPHERE conversations "
        f"of {args.minutes:g} min ({made_s:.0f} s to write; shorten compresses their mu-law "
        f"{ratio:.2f}x; decoding time grows with the compressed size), 4-6 s segments covering "
        f"both sides, speeds {', '.join(f'{s:g}' for s in SPEEDS)}; wav.scp in s5c's sph2pipe form "
        "(sox speed stages for 0.9/1.1), sph2pipe not installed, so read in-process. 40-dim "
        "fbank at 8 kHz, `make_features` with nj=1 in a fresh process; CPU s of that process "
        "and its children, x real time per core = utterance audio s / CPU s. Peak RSS: VmHWM of "
        "that process (torch and lhotse included; not the old path's pipe processes). Machine: "
        "2 CPU cores shared with other jobs (wall s shows the contention; CPU s does not).",
        "",
        f"Command: `{command}`",
        "",
        *head, *table, "",
        "Where the first row's time goes (each piece timed alone in the benchmark's process):",
        "",
        *split,
        *([""] + checks if checks else []),
    ], args.publish)


if __name__ == "__main__":
    main()
