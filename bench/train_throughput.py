"""Training throughput of asrdist-train against a bare PyTorch loop, data pipeline speed, memory.

    python -m bench.train_throughput [--data DIR --targets DIR] [--steps N] [--repeats R]

Without --data/--targets it writes a synthetic corpus of the mini recipe's size (3 h of 40-dim
fbank, 100 frames/s, 2-6 s utterances) and a copy four times as large. It measures:

1. frames/s of ``asrdist.train.trainer.train`` in steady state (between its first and last
   metrics records) and end to end (index, model, first shuffle-buffer fill, final.pt),
   against a bare loop (forward, cross-entropy, backward, clipping, SGD step) over the same
   model and the very same batches, preloaded in memory;
   runs alternate; the best of the repeats (as timeit) and the median of the paired
   ratios are reported, since the machine may be shared;
2. frames/s of the data pipeline alone (disk read, CMVN, chunking, shuffle buffer), as a
   multiple of what training consumes;
3. peak resident memory of ``asrdist-train`` processes on the 1x and 4x corpora.
"""

from __future__ import annotations

import argparse
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
from asrdist.parallel.strategy import Single
from asrdist.train.config import TrainConfig, make_config
from asrdist.train.metrics import read_metrics
from asrdist.train.trainer import train

RECIPE_CONF = Path(__file__).resolve().parent.parent / "recipes/mini/conf/train_blstm.yaml"
MODEL_KEYS = ("model", "layers", "units", "bottleneck", "chunk_len", "batch_size")


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


def _config(data: Path, targets: Path, out: Path, steps: int, **overrides: object
            ) -> TrainConfig:
    """The mini recipe's BLSTM options, for ``steps`` steps without held-out evaluation
    (``overrides``: other options, e.g. the device or a smaller model)."""
    return make_config(RECIPE_CONF, {
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


def bare_loop(cfg: TrainConfig, batches: list, input_dim: int, num_pdfs: int) -> float:
    """frames/s of the plainest loop doing the same maths (SGD, momentum, clipping), on
    ``cfg.device`` with the batches already there."""
    torch.manual_seed(cfg.seed)
    model = build_model(cfg.model_config(), input_dim, num_pdfs).to(cfg.device)
    opt = torch.optim.SGD(model.parameters(), lr=cfg.lr, momentum=cfg.momentum)
    batches = [(x.to(cfg.device), y.to(cfg.device)) for x, y in batches]
    frames = sum(int((y != IGNORE).sum()) for _, y in batches)
    t0 = time.perf_counter()
    for x, y in batches:
        loss = F.cross_entropy(model(x).flatten(0, 1), y.flatten(), ignore_index=IGNORE)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        if cfg.grad_clip > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
        opt.step()
        loss.item()
    return frames / (time.perf_counter() - t0)


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


def pipeline_rate(cfg: TrainConfig, steps: int) -> float:
    """frames/s of reading + CMVN + chunking + shuffling alone."""
    t0 = time.perf_counter()
    batches = same_batches(cfg, steps)
    seconds = time.perf_counter() - t0
    return sum(int((y != IGNORE).sum()) for _, y in batches) / seconds


def peak_rss_mb(cfg: TrainConfig) -> float:
    """Peak resident memory of an asrdist-train process on ``cfg``'s corpus."""
    args = [f"--{k.replace('_', '-')}={v}" for k, v in cfg.to_dict().items()
            if k not in ("nesterov", "cmvn_norm_vars", "bf16", "resume")]
    proc = subprocess.Popen(
        [sys.executable, "-c", "from asrdist.cli.train import main; main()", *args],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    _, status, usage = os.wait4(proc.pid, 0)
    if status != 0:
        raise RuntimeError(f"asrdist-train failed with status {status}")
    return usage.ru_maxrss / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path)
    parser.add_argument("--targets", type=Path)
    parser.add_argument("--hours", type=float, default=3.0)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="asrdist-bench-") as tmp:
        run(args, Path(tmp))


def run(args: argparse.Namespace, work: Path) -> None:
    """All measurements, with corpora and run dirs under ``work``."""
    if args.data:
        data, targets = args.data, args.targets
        big = None
    else:
        data, targets = write_corpus(work / "x1", args.hours)
        big = write_corpus(work / "x4", 4 * args.hours, seed=1)
    corpus = load_corpus(data, targets)
    cfg = _config(data, targets, work / "warm", args.steps)
    model = {k: getattr(cfg, k) for k in MODEL_KEYS}
    print(f"corpus: {len(corpus)} utterances, {int(corpus.num_frames.sum())} frames; "
          f"{model} from {RECIPE_CONF.name}; torch threads {torch.get_num_threads()}, cpu",
          flush=True)
    batches = same_batches(cfg, args.steps)
    input_dim = batches[0][0].shape[-1]
    bare_loop(cfg, batches[:3], input_dim, corpus.num_pdfs)  # warm-up
    bare, e2e, loop, fixed = [], [], [], []
    for r in range(args.repeats):
        bare.append(bare_loop(cfg, batches, input_dim, corpus.num_pdfs))
        rate, loop_rate, fixed_s = asrdist_run(_config(data, targets, work / f"run{r}",
                                                       args.steps))
        e2e.append(rate)
        loop.append(loop_rate)
        fixed.append(fixed_s)
        print(f"repeat {r}: bare {bare[-1]:.0f}  asrdist steady {loop_rate:.0f}  "
              f"end-to-end {rate:.0f} frames/s (fixed cost {fixed_s:.2f} s)", flush=True)
    # the machine is shared: the best of each (as timeit) and the median of paired ratios
    b, e, lp = max(bare), max(e2e), max(loop)
    pairs = statistics.median(x / y for x, y in zip(loop, bare, strict=True))
    print(f"bare loop            {b:10.0f} frames/s  (best of {args.repeats})")
    print(f"asrdist steady state {lp:10.0f} frames/s  ({100 * lp / b:.1f}% of bare; median "
          f"paired ratio {100 * pairs:.1f}%)")
    print(f"asrdist end-to-end   {e:10.0f} frames/s  ({100 * e / b:.1f}% of bare over "
          f"{args.steps} steps; fixed cost (index, model, first buffer fill, final.pt) "
          f"{statistics.median(fixed):.2f} s, once per run)")
    pipe = pipeline_rate(_config(data, targets, work / "pipe", 4 * args.steps), 4 * args.steps)
    print(f"data pipeline alone  {pipe:10.0f} frames/s  ({pipe / lp:.1f}x what training uses)")
    if big is not None:
        small_mb = peak_rss_mb(_config(data, targets, work / "mem1", 5))
        big_mb = peak_rss_mb(_config(*big, work / "mem4", 5))
        print(f"peak RSS, 5 steps    1x corpus {small_mb:.0f} MB, 4x corpus {big_mb:.0f} MB "
              f"({100 * (big_mb / small_mb - 1):+.1f}%)")


if __name__ == "__main__":
    main()
