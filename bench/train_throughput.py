"""Training throughput of asrdist-train against a bare PyTorch loop, data pipeline speed, memory.

    python -m bench.train_throughput [--data DIR --targets DIR] [--steps N] [--repeats R]
        [--config recipes/mini/conf/train_conformer.yaml] [--publish [FILE]]

The Conformer's section: ``--hours 1 --steps 30 --repeats 3 --config
recipes/mini/conf/train_conformer.yaml --publish bench/results/train_throughput_conformer.md``.

Without --data/--targets it writes a synthetic corpus of the mini recipe's size (3 h of
``--dim`` features, by default 13 as the recipe's MFCC input, 100 frames/s, 2-6 s utterances)
and a copy four times as large. It measures:

1. frames/s of ``asrdist.train.trainer.train`` in steady state (between its first and last
   metrics records) and end to end (index, model, first shuffle-buffer fill, final.pt),
   against a bare loop (forward, cross-entropy, backward, clipping, SGD step) over the same
   model and the very same batches, preloaded in memory; twice: with the recipe's SpecAugment
   masks, which the bare loop then draws and applies too (the same masks on CPU, from the
   trainer's mask generator), and with no masks on either side;
   runs alternate; the best of the repeats (as timeit), the median of the paired
   ratios and the best ``log_every``-step interval of each side are reported, since the
   machine may be shared;
2. frames/s of the data pipeline alone (disk read, CMVN, chunking, shuffle buffer), as a
   multiple of what training consumes;
3. peak resident memory of ``asrdist-train`` processes on the 1x and 4x corpora.
"""

from __future__ import annotations

import argparse
import itertools
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import kaldiio
import numpy as np
import torch
from torch.nn import functional as F

from asrdist.data.dataset import IGNORE, ChunkStream, UtteranceReader, load_corpus, split_heldout
from asrdist.models.build import build_model
from asrdist.optim.build import build_optimizer
from asrdist.options import flag, kind
from asrdist.parallel.strategy import Single
from asrdist.train.config import TrainConfig, all_fields, make_config
from asrdist.train.metrics import read_metrics
from asrdist.train.spec_augment import make_spec_augment, mask_generator
from asrdist.train.trainer import train
from bench.results import publish, publish_option, shown

RECIPE_CONF = Path(__file__).resolve().parent.parent / "recipes/mini/conf/train_blstm.yaml"
MODEL_KEYS = ("model", "layers", "units", "bottleneck", "chunk_len", "batch_size")
MASKS = ("feature_masks", "feature_mask_width", "time_masks", "time_mask_width")
# each side of the comparison as the recipe has it, then with no masks on either side
SETTINGS = {"recipe's masks": {}, "no masks": {"feature_masks": 0, "time_masks": 0}}


def write_corpus(root: Path, hours: float, dim: int = 40, num_pdfs: int = 120,
                 seed: int = 0) -> tuple[Path, Path]:
    """A Kaldi data dir + ingested targets of ``hours`` of synthetic frames."""
    rng = np.random.default_rng(seed)
    data, targets = root / "data", root / "targets"
    data.mkdir(parents=True)
    targets.mkdir(parents=True)
    means = rng.normal(0, 1, (num_pdfs, dim)).astype(np.float32)
    total, n = int(hours * 360_000), 0
    counts = np.zeros(num_pdfs, dtype=np.int64)
    utt2spk, frames = [], []
    with kaldiio.WriteHelper(f"ark,scp:{data / 'feats.ark'},{data / 'feats.scp'}") as wf, \
            kaldiio.WriteHelper(f"ark,scp:{targets / 'pdf.ark'},{targets / 'pdf.scp'}") as wt:
        while total > 0:
            length = int(rng.integers(200, 600))
            total -= length
            spk = f"spk{n % 40:02d}"
            utt = f"{spk}-u{n:06d}"
            n += 1
            labels = np.repeat(rng.integers(0, num_pdfs, length), 5)[:length]
            feats = means[labels] + rng.normal(0, 0.5, (length, dim)).astype(np.float32)
            wf(utt, feats)
            wt(utt, labels.astype(np.int32))
            counts += np.bincount(labels, minlength=num_pdfs)
            utt2spk.append(f"{utt} {spk}\n")
            frames.append(f"{utt} {length}\n")
    # Kaldi data dirs are sorted by utterance id; these ids are generated in sorted order
    (data / "utt2spk").write_text("".join(utt2spk))
    (data / "utt2num_frames").write_text("".join(frames))
    (targets / "num_pdfs").write_text(f"{num_pdfs}\n")
    (targets / "pdf_counts").write_text("[ " + " ".join(map(str, counts)) + " ]\n")
    return data, targets


def run_config(data: Path, targets: Path, out: Path, steps: int, conf: Path = RECIPE_CONF,
               **overrides: object) -> TrainConfig:
    """The mini recipe's BLSTM options (``conf``: another of its configs, the Conformer's), for
    ``steps`` steps without held-out evaluation (``overrides``: other options, e.g. the device
    or a smaller model)."""
    return make_config(conf, {
        "data": str(data), "targets": str(targets), "out": str(out), "epochs": 1,
        "max_steps": steps, "heldout_utts": 0, "checkpoint_every": 0, "log_every": 5,
        "cmvn": "utt", **overrides,
    })


def same_batches(cfg: TrainConfig, steps: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """The first ``steps`` batches asrdist trains on (same seed, epoch 0, rank 0)."""
    from asrdist.data.dataset import epoch_shards

    corpus = load_corpus(cfg.data, cfg.targets)
    train_rows, _ = split_heldout(corpus, cfg.heldout_utts, cfg.seed)
    shard = epoch_shards(train_rows, cfg.seed, 0, 1)[0]
    reader = UtteranceReader(corpus, cfg.cmvn, cfg.cmvn_norm_vars, None)
    stream = ChunkStream(reader, shard, cfg.chunk_len, cfg.chunk_left_context,
                         cfg.chunk_right_context, cfg.batch_size, cfg.shuffle_buffer,
                         [cfg.seed, 0, 0])
    return [tuple(map(torch.from_numpy, stream.next_batch())) for _ in range(steps)]


def bare_loop(cfg: TrainConfig, batches: list, input_dim: int, num_pdfs: int,
              intervals: list[float] | None = None) -> float:
    """frames/s of the plainest loop doing the same maths (``cfg``'s optimizer, clipping, and
    ``cfg``'s SpecAugment masks: the trainer's very masks on CPU), on ``cfg.device`` with the
    batches already there. ``intervals`` gets the frames/s of each run of ``cfg.log_every``
    steps after the first, as the trainer's metrics records time them."""
    torch.manual_seed(cfg.seed)
    model = build_model(cfg.model_config(), input_dim, num_pdfs).to(cfg.device)
    opt = build_optimizer(cfg.optim, model, cfg.lr, cfg.ng)  # torch's SGD or AdamW
    masks = make_spec_augment(cfg.mask_options(), mask_generator(cfg.seed, 0, cfg.device))
    batches = [(x.to(cfg.device), y.to(cfg.device)) for x, y in batches]
    counts = [int((y != IGNORE).sum()) for _, y in batches]
    t0 = mark = time.perf_counter()
    for step, (x, y) in enumerate(batches, 1):
        if masks is not None:
            x = masks(x)
        loss = F.cross_entropy(model(x).flatten(0, 1), y.flatten(), ignore_index=IGNORE)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        if cfg.grad_clip > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
        opt.step()
        loss.item()
        if step % cfg.log_every == 0:
            now = time.perf_counter()
            if intervals is not None and step > cfg.log_every:
                intervals.append(sum(counts[step - cfg.log_every:step]) / (now - mark))
            mark = now
    return sum(counts) / (time.perf_counter() - t0)


def asrdist_run(cfg: TrainConfig) -> tuple[float, float, float]:
    """asrdist frames/s: end to end of train(), and steady state (between the first and last
    metrics records, i.e. after the shuffle buffer's first fill); and the fixed seconds."""
    t0 = time.perf_counter()
    train(cfg, Single())
    seconds = time.perf_counter() - t0
    records = [r for r in read_metrics(Path(cfg.out) / "metrics.jsonl") if r["kind"] == "train"]
    first, last = records[0], records[-1]
    steady = (last["frames"] - first["frames"]) / (last["wall_s"] - first["wall_s"])
    fixed = seconds - last["frames"] / steady
    return last["frames"] / seconds, steady, fixed


def trainer_intervals(out: Path) -> list[float]:
    """frames/s between consecutive train records of the run in ``out`` (``cfg.log_every``
    steps each, the writing of a record included)."""
    records = [r for r in read_metrics(out / "metrics.jsonl") if r["kind"] == "train"]
    return [(b["frames"] - a["frames"]) / (b["wall_s"] - a["wall_s"])
            for a, b in itertools.pairwise(records)]


def pipeline_rate(cfg: TrainConfig, steps: int) -> float:
    """frames/s of reading + CMVN + chunking + shuffling alone."""
    t0 = time.perf_counter()
    batches = same_batches(cfg, steps)
    seconds = time.perf_counter() - t0
    return sum(int((y != IGNORE).sum()) for _, y in batches) / seconds


def train_flags(cfg: TrainConfig) -> list[str]:
    """asrdist-train's flags for ``cfg``'s options that differ from their declared defaults
    (the others are the CLI's defaults): a bool as ``--name`` / ``--no-name``, as the CLI
    declares it, since a bool flag takes no value."""
    fields, flags = all_fields(), []
    for name, value in cfg.to_dict().items():
        f = fields[name]
        if value == f.default:
            continue
        if kind(f) == "bool":
            flags.append(flag(name) if value else f"--no-{flag(name)[2:]}")
        else:
            flags.append(f"{flag(name)}={value}")
    return flags


def peak_rss_mb(cfg: TrainConfig) -> float:
    """Peak resident memory of an asrdist-train process on ``cfg``'s corpus."""
    with tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen([sys.executable, "-m", "asrdist.cli.train", *train_flags(cfg)],
                                stdout=subprocess.DEVNULL, stderr=err)
        _, status, usage = os.wait4(proc.pid, 0)  # this child's own peak, not all children's
        if status != 0:
            err.seek(0)
            raise RuntimeError(f"asrdist-train failed with status {status}: "
                               f"{err.read().strip()[-2000:]}")
    return usage.ru_maxrss / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path)
    parser.add_argument("--targets", type=Path)
    parser.add_argument("--hours", type=float, default=3.0)
    parser.add_argument("--dim", type=int, default=13, help="feature dims of the corpus made")
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--config", type=Path, default=RECIPE_CONF,
                        help="the asrdist-train config measured (default: the mini BLSTM's)")
    publish_option(parser, __file__)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="asrdist-bench-") as tmp:
        report = run(args, Path(tmp))
    given = (" --data DATA --targets TARGETS" if args.data else f" --hours {args.hours:g}")
    publish(["## Training throughput", "",
             f"Command: `.venv/bin/python -m bench.train_throughput{given} --steps {args.steps} "
             f"--repeats {args.repeats} --config {shown(args.config, 'CONFIG')}` "
             f"({time.strftime('%Y-%m-%d %H:%M')}, {os.cpu_count()} "
             f"CPU cores, 1-minute load average {os.getloadavg()[0]:.1f} at the end). The "
             "trainer (strategy single) against a bare PyTorch loop doing the same work over the "
             "same model and batches, the recipe's masks on both sides and then none; the "
             "module's docstring says what each figure is.", "",
             *(f"    {line}" for line in report)], args.publish)


def run(args: argparse.Namespace, work: Path) -> list[str]:
    """All measurements, with corpora and run dirs under ``work``; the report's lines (the
    progress is printed as it goes)."""
    if args.data:
        data, targets = args.data, args.targets
        big = None
    else:
        data, targets = write_corpus(work / "x1", args.hours, args.dim)
        big = write_corpus(work / "x4", 4 * args.hours, args.dim, seed=1)
    corpus = load_corpus(data, targets)
    conf = args.config
    cfg = run_config(data, targets, work / "warm", args.steps, conf)
    model = {k: getattr(cfg, k) for k in MODEL_KEYS}
    report = [f"corpus: {len(corpus)} utterances, {int(corpus.num_frames.sum())} frames; "
              f"{model}, masks {({k: getattr(cfg, k) for k in MASKS})} from "
              f"{conf.name}; torch threads {torch.get_num_threads()}, cpu"]
    print(report[0], flush=True)
    batches = same_batches(cfg, args.steps)
    input_dim = batches[0][0].shape[-1]
    bare_loop(cfg, batches[:3], input_dim, corpus.num_pdfs)  # warm-up
    found: dict[str, dict[str, list[float]]] = {
        name: {k: [] for k in ("bare", "steady", "e2e", "fixed", "bare_iv", "asrdist_iv")}
        for name in SETTINGS}
    for r in range(args.repeats):
        for i, (name, overrides) in enumerate(SETTINGS.items()):  # the settings alternate too
            got = found[name]
            cfg = run_config(data, targets, work / f"run{r}-{i}", args.steps, conf, **overrides)
            bare_first = r % 2 == 0  # the order within a pair alternates against drift
            if bare_first:
                got["bare"].append(bare_loop(cfg, batches, input_dim, corpus.num_pdfs,
                                             got["bare_iv"]))
            rate, steady, fixed_s = asrdist_run(cfg)
            got["asrdist_iv"] += trainer_intervals(Path(cfg.out))
            if not bare_first:
                got["bare"].append(bare_loop(cfg, batches, input_dim, corpus.num_pdfs,
                                             got["bare_iv"]))
            got["e2e"].append(rate)
            got["steady"].append(steady)
            got["fixed"].append(fixed_s)
            print(f"repeat {r}, {name}: bare {got['bare'][-1]:.0f}  asrdist steady {steady:.0f} "
                  f" end-to-end {rate:.0f} frames/s (fixed cost {fixed_s:.2f} s)", flush=True)
    for name, got in found.items():
        # the machine is shared: the best of each (as timeit) and the median of paired ratios
        b, e, lp = max(got["bare"]), max(got["e2e"]), max(got["steady"])
        pairs = statistics.median(x / y for x, y in zip(got["steady"], got["bare"], strict=True))
        report += [
            f"{name}, on both sides:",
            f"  bare loop            {b:10.0f} frames/s  (best of {args.repeats})",
            f"  asrdist steady state {lp:10.0f} frames/s  ({100 * lp / b:.1f}% of bare; "
            f"median paired ratio {100 * pairs:.1f}%)",
            f"  asrdist end-to-end   {e:10.0f} frames/s  ({100 * e / b:.1f}% of bare over "
            f"{args.steps} steps; fixed cost (index, model, first buffer fill, final.pt) "
            f"{statistics.median(got['fixed']):.2f} s, once per run)",
            f"  best {cfg.log_every}-step interval: bare {max(got['bare_iv']):.0f}, asrdist "
            f"{max(got['asrdist_iv']):.0f} frames/s "
            f"({100 * max(got['asrdist_iv']) / max(got['bare_iv']):.1f}%; "
            f"{len(got['bare_iv'])} and {len(got['asrdist_iv'])} intervals)"]
    pipe = pipeline_rate(run_config(data, targets, work / "pipe", 4 * args.steps, conf),
                         4 * args.steps)
    used = max(next(iter(found.values()))["steady"])
    report.append(f"data pipeline alone  {pipe:10.0f} frames/s  ({pipe / used:.1f}x what "
                  "training uses with the recipe's masks)")
    if big is not None:
        small_mb = peak_rss_mb(run_config(data, targets, work / "mem1", 5, conf))
        big_mb = peak_rss_mb(run_config(*big, work / "mem4", 5, conf))
        report.append(f"peak RSS, 5 steps    1x corpus {small_mb:.0f} MB, 4x corpus "
                      f"{big_mb:.0f} MB ({100 * (big_mb / small_mb - 1):+.1f}%)")
    return report


if __name__ == "__main__":
    main()
