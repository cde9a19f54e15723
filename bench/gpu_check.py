"""The one command to run first on a machine with a GPU: what only a GPU shows, in one table set.

    make gpu-check                            # in the virtualenv: python -m bench.gpu_check
    PYTHONPATH=wheels:. python3 -m bench.gpu_check --budget 300   # a bare host (README)

It prints the GPU, its driver, torch, CUDA and cuDNN first, then runs its parts in order of
importance, each timed, in one process tree:

1. the tests marked ``cuda`` (``pytest -m cuda``);
2. forward + backward frames/s of the paper-size BLSTM (6 x 512 cells per direction, 260
   inputs, a 256 bottleneck, 32,000 outputs) on 21-frame chunks in fp32, bf16 and fp16, each
   as :func:`asrdist.train.precision.choose_precision` makes it (the dtype cuDNN's LSTM really
   runs in, and whether a gradient scaler is used);
3. ``asrdist.train.trainer.train`` against a bare loop over the same model and batches, the
   recipe's SpecAugment masks on both sides and then none (bench.train_throughput);
4. ADPSGD's exchange overlapped with the step (``bench.exchange_cost.gpu_rows``);
5. every registered multi-learner strategy as real ``python -m asrdist.cli.train`` processes
   sharing the one device: 2 learners (hadpsgd: 4, two super-learners of 2), backend gloo,
   since NCCL needs a device per learner;
6. NG-SGD against SGD on the device (bench.ngsgd_throughput);
7. the simulator's learners computed together against one at a time on the device: 1, 16 and
   64 learners of the mini recipe's BLSTM, host seconds per simulated step (bench.sim_cost);
8. the network's scores on the device (what ``asrdist-compute-loglikes --device`` runs): frames/s
   of the paper-size BLSTM, and the disk an hour of speech takes at each ``--compress``.

A lease can end at any time, so its generated file, bench/results/gpu_check.md, is rewritten
(atomically) as each part ends, listing the parts not run yet; a part that raises is one FAILED
line and the others still run. ``--budget SECONDS`` skips each part whose estimated cost
(:data:`PARTS`, guessed before any GPU run: correct them from the seconds each part's heading
records) does not fit in what is left of it, so the least important ones go first.

Without CUDA (or with ``--tiny``) it runs the same code at a tiny size on the CPU, so the test
run keeps it working; its figures are then printed, and written only with ``--publish``.
"""

from __future__ import annotations

import argparse
import importlib
import io
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import kaldiio
import numpy as np
import torch

import asrdist
from asrdist.decode.acoustic import NnetScorer, list_utterances
from asrdist.decode.loglikes import COMPRESSION
from asrdist.errors import AsrdistError, first_line
from asrdist.models.blstm import BLSTM
from asrdist.models.build import ModelConfig, build_model
from asrdist.models.final import Exported, write_final
from asrdist.parallel import registry
from asrdist.parallel.launch.rendezvous import BACKEND_ENV, free_port
from asrdist.train.metrics import metrics_path, read_metrics
from asrdist.train.precision import PRECISIONS, Precision, choose_precision
from bench import ngsgd_throughput, sim_cost, staging_cost, train_throughput
from bench.projection import CHUNK, paper_model
from bench.results import generated, publish_option, write_generated

REPO = Path(__file__).resolve().parents[1]
HEADING = "## GPU check"
DEFAULT_BUDGET_S = 360.0  # the whole check on one H100 (the estimates below add up to less)


@dataclass(frozen=True)
class Size:
    """How big each measurement is: the GPU's or the CPU's smoke-test size."""

    name: str
    blstm_batch: int  # 21-frame chunks per forward + backward
    reps: int
    corpus_hours: float  # synthetic corpus for the trainer and the learners
    corpus_dim: int
    corpus_pdfs: int
    model: dict  # asrdist-train model options
    batch_size: int
    steps: int
    learner_steps: int  # per strategy: nine of them share the budget
    ngsgd_steps: int

    @property
    def tiny(self) -> bool:
        return self.name == "tiny"

    def blstm(self) -> BLSTM:
        if not self.tiny:
            return paper_model()
        return BLSTM(self.corpus_dim, self.corpus_pdfs, layers=1, units=16)


GPU = Size("gpu", blstm_batch=256, reps=10, corpus_hours=0.5, corpus_dim=260,
           corpus_pdfs=32000, model={"layers": 6, "units": 512, "bottleneck": 256},
           batch_size=64, steps=60, learner_steps=20, ngsgd_steps=60)
TINY = Size("tiny", blstm_batch=4, reps=2, corpus_hours=0.05, corpus_dim=40, corpus_pdfs=120,
            model={"layers": 1, "units": 16, "bottleneck": 0}, batch_size=8, steps=12,
            learner_steps=12, ngsgd_steps=4)


class Check:
    """What the parts share: the size, the device, a scratch directory and the synthetic corpus
    (written by the first part that needs it, so its cost counts in that part's time)."""

    def __init__(self, size: Size, device: torch.device, work: Path,
                 algos: list[str] | None = None) -> None:
        self.size, self.device, self.work = size, device, work
        self.algos = algos or [a for a in registry.algo_names() if a != "single"]

    @cached_property
    def corpus(self) -> tuple[Path, Path]:
        return train_throughput.write_corpus(self.work / "corpus", self.size.corpus_hours,
                                             dim=self.size.corpus_dim,
                                             num_pdfs=self.size.corpus_pdfs)


class PartSkipped(Exception):
    """Raised by a part that cannot run here; its message says why."""


def cuda_tests(check: Check) -> list[str]:
    """The ``cuda``-marked tests' summary line (all skipped without a GPU)."""
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-m", "cuda", "-p",
                           "no:cacheprovider", "tests"], cwd=REPO, capture_output=True,
                          text=True, check=False)
    summary = (proc.stdout.strip().splitlines() or ["no output"])[-1].strip("= ")
    failed = proc.returncode not in (0, 5)  # 5: none collected
    return [f"`pytest -m cuda tests`: {summary}" + (" (FAILED)" if failed else ""), ""]


def training_step(model: BLSTM, x: torch.Tensor, y: torch.Tensor,
                  precision: Precision) -> Callable[[], None]:
    """One forward + backward in ``precision`` (its autocast, its scaler's scaled loss)."""
    scaler = precision.scaler()
    outputs = model.output.out_features

    def step() -> None:
        model.zero_grad(set_to_none=True)
        with precision.autocast_context():
            loss = torch.nn.functional.cross_entropy(model(x).reshape(-1, outputs), y)
        (scaler.scale(loss) if scaler is not None else loss).backward()

    return step


def blstm_rates(check: Check) -> list[str]:
    """Forward + backward frames/s of the BLSTM in each precision, as the trainer would run it
    (asrdist.train.precision: autocast dtype, the LSTM's real dtype, a scaler for fp16)."""
    size, device = check.size, check.device
    model = size.blstm().to(device)
    outputs = model.output.out_features
    x = torch.randn(size.blstm_batch, CHUNK, model.lstm.input_size, device=device)
    y = torch.randint(0, outputs, (size.blstm_batch * CHUNK,), device=device)
    rows = []
    fp32 = None
    for name in PRECISIONS:
        try:
            precision = choose_precision(name, device)
        except AsrdistError as exc:
            rows.append(f"| {name} | not available: {first_line(exc)} | | | | |")
            continue
        step = training_step(model, x, y, precision)
        rate = size.blstm_batch * CHUNK / staging_cost.timed(step, device, size.reps)
        fp32 = fp32 or rate
        lstm = str(precision.lstm).removeprefix("torch.")
        rows.append(f"| {name} | {precision.name} | {lstm} | "
                    f"{'yes' if precision.scaled else 'no'} | {rate:,.0f} | {rate / fp32:.2f} |")
    params = sum(p.numel() for p in model.parameters())
    return [f"BLSTM of {params / 1e6:.1f} M parameters, forward + backward of "
            f"{size.blstm_batch} chunks of {CHUNK} frames, mean of {size.reps} after a warm-up.",
            "", "| asked | runs as | LSTM dtype | loss scaling | frames/s | x fp32 |",
            "|---|---|---|---|---|---|", *rows, ""]


def trainer_against_bare(check: Check) -> list[str]:
    """asrdist's trainer and a bare loop on the same model and batches, doing the same work:
    the recipe's SpecAugment masks on both sides, then none (bench.train_throughput)."""
    size, work = check.size, check.work
    options = {**size.model, "batch_size": size.batch_size, "device": str(check.device),
               "log_every": 2}
    cfg = train_throughput.run_config(*check.corpus, work / "warm", size.steps, **options)
    batches = train_throughput.same_batches(cfg, size.steps)
    input_dim, num_pdfs = batches[0][0].shape[-1], size.corpus_pdfs
    train_throughput.bare_loop(cfg, batches[:3], input_dim, num_pdfs)  # warm-up
    rows = []
    for name, masks in train_throughput.SETTINGS.items():
        cfg = train_throughput.run_config(*check.corpus, work / name.replace(" ", "_"),
                                       size.steps, **options, **masks)
        bare = train_throughput.bare_loop(cfg, batches, input_dim, num_pdfs)
        end_to_end, steady, fixed = train_throughput.asrdist_run(cfg)
        rows += [f"| {name} | bare PyTorch loop | {bare:,.0f} | 1.00 |",
                 f"| {name} | asrdist trainer, steady state | {steady:,.0f} | "
                 f"{steady / bare:.2f} |",
                 f"| {name} | asrdist trainer, end to end (fixed cost {fixed:.1f} s) | "
                 f"{end_to_end:,.0f} | {end_to_end / bare:.2f} |"]
    return [f"{size.steps} steps of {size.batch_size} chunks, model {size.model}, the same "
            "batches preloaded for the bare loop (forward, cross-entropy, backward, clipping, "
            "SGD step, the same masks).", "",
            "| masks | loop | frames/s | x bare |", "|---|---|---|---|", *rows, ""]


def exchange_overlap(check: Check) -> list[str]:
    """ADPSGD's exchange against the step it should hide behind (bench.exchange_cost)."""
    try:
        exchange_cost = importlib.import_module("bench.exchange_cost")
    except ModuleNotFoundError as exc:
        if exc.name != "bench.exchange_cost":
            raise
        raise PartSkipped("bench.exchange_cost not present") from None
    return [*exchange_cost.gpu_rows(tiny=check.size.tiny), ""]


def ngsgd(check: Check) -> list[str]:
    models = ngsgd_throughput.MODELS if not check.size.tiny else {
        name: (config, chunk, 4) for name, (config, chunk, _) in
        list(ngsgd_throughput.MODELS.items())[:1]}
    rows = ngsgd_throughput.measure(models, check.size.ngsgd_steps, check.device)
    return [*ngsgd_throughput.TABLE_HEAD, *rows, ""]


def simulator(check: Check) -> list[str]:
    device = check.device.type
    if not check.size.tiny:
        rows = sim_cost.run_all(["ssgd", "adpsgd-random"], [1, 16, 64], steps=3, batch=128,
                                layers=2, units=128, together=64, device=device)
    else:  # in this process: the smoke test's time is short
        rows = [sim_cost.one("ssgd", 2, 1, batch=4, layers=1, units=8, together=together,
                             device=device) for together in (0, 2)]
    return [*sim_cost.table(rows), ""]


def scores_on_device(check: Check) -> list[str]:
    """asrdist-compute-loglikes' scorer on the device, over the corpus's first utterances, and
    the bytes each --compress stores per frame (measured on those scores, not estimated)."""
    size = check.size
    data, _ = check.corpus
    config = ModelConfig(**size.model)
    final = check.work / "scores" / "final.pt"
    final.parent.mkdir(parents=True, exist_ok=True)
    write_final(final, build_model(config, size.corpus_dim, size.corpus_pdfs),
                Exported(config, size.corpus_dim, size.corpus_pdfs,
                         np.full(size.corpus_pdfs, -np.log(size.corpus_pdfs), np.float32),
                         chunk_len=21, left_context=40, right_context=40))
    scorer = NnetScorer(final, data, device=str(check.device))
    utts = list_utterances(data)[:4 if size.tiny else 100]
    frames = stored_frames = 0
    stored = dict.fromkeys(COMPRESSION, 0)
    seconds = 0.0
    for i, utt in enumerate(utts):
        t0 = time.perf_counter()
        (_, scores), = scorer.scores([utt])  # back on the host: the device is synchronised
        seconds += time.perf_counter() - t0
        frames += scores.shape[0]
        if i < 10:  # kaldiio's 1byte compression takes seconds an utterance at 32 k pdfs
            stored_frames += scores.shape[0]
            for name, method in COMPRESSION.items():
                buf = io.BytesIO()
                kaldiio.save_ark(buf, {utt: scores}, compression_method=method)
                stored[name] += len(buf.getvalue())
    per_hour = {name: b / stored_frames * 360_000 / 1e9 for name, b in stored.items()}
    return [f"{len(utts)} utterances, {frames} frames (the disk: the first "
            f"{min(10, len(utts))}), "
            f"model {size.model}, {size.corpus_pdfs} pdfs, 21-frame chunks with 40 frames of "
            "context either side:", "",
            "| device | frames/s | GB an hour of speech: " + " / ".join(COMPRESSION) + " |",
            "|---|---|---|",
            f"| {check.device} | {frames / seconds:,.0f} | "
            + " / ".join(f"{per_hour[name]:.2f}" for name in COMPRESSION) + " |", ""]


def learners_of(algo: str) -> tuple[int, list[str]]:
    """How many learners a strategy runs with here, and its extra options."""
    if algo == "hadpsgd":  # two super-learners of two: hierarchical, not adpsgd renamed
        return 4, ["--learners-per-node", "2"]
    return 2, []


def learner_env(n: int) -> dict[str, str]:
    """The learners' environment: this one's, less any launcher's variables, with a fresh
    rendezvous and the PYTHONPATH extended by the asrdist this process imported (a bare host's
    wheels directory stays on it)."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("SLURM_", "PMI_", "OMPI_", "MASTER_", "RANK", "WORLD_SIZE"))}
    paths = [str(Path(asrdist.__file__).resolve().parents[1]),
             *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    return env | {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(free_port()),
                  "WORLD_SIZE": str(n), BACKEND_ENV: "gloo", "OMP_NUM_THREADS": "1",
                  "PYTHONPATH": os.pathsep.join(dict.fromkeys(paths))}


def run_learners(algo: str, check: Check, out: Path, compress: str = "") -> str:
    """One table row: ``algo`` as real learner processes on the one device (``compress``:
    its ``--compress`` codec)."""
    size = check.size
    n, extra = learners_of(algo)
    if compress:
        extra = [*extra, "--compress", compress]
    label = f"{algo} --compress {compress}" if compress else algo
    data, targets = check.corpus
    args = ["--data", str(data), "--targets", str(targets), "--out", str(out),
            "--algo", algo, "--device", check.device.type, "--batch-size", str(size.batch_size),
            "--max-steps", str(size.learner_steps), "--heldout-utts", "0",
            "--checkpoint-every", "0", "--log-every", "2", "--epochs", "100", "--cmvn", "utt",
            "--exchange-timeout", "120", *extra,
            *[f"--{k.replace('_', '-')}={v}" for k, v in size.model.items()]]
    env = learner_env(n)
    out.parent.mkdir(parents=True, exist_ok=True)  # stderr to files: a full pipe stalls a learner
    logs = [out.parent / f"{out.name}.stderr{r}.txt" for r in range(n)]
    t0 = time.perf_counter()
    procs = []
    for r, log in enumerate(logs):
        with open(log, "w") as err:
            procs.append(subprocess.Popen([sys.executable, "-m", "asrdist.cli.train", *args],
                                          env=env | {"RANK": str(r), "LOCAL_RANK": str(r)},
                                          stdout=subprocess.DEVNULL, stderr=err))
    codes = [p.wait(timeout=600) for p in procs]
    wall = time.perf_counter() - t0
    if any(codes):
        log = next(log for log, c in zip(logs, codes, strict=True) if c)
        said = log.read_text().strip().splitlines()
        return f"| {label} | {n} | FAILED {codes}: {said[-1] if said else ''} | | |"
    rate = 0.0
    for rank in range(n):
        train_records = [r for r in read_metrics(metrics_path(out, rank)) if r["kind"] == "train"]
        first, last = train_records[0], train_records[-1]
        rate += (last["frames"] - first["frames"]) / max(last["wall_s"] - first["wall_s"], 1e-9)
    return f"| {label} | {n} | 0 | {rate:,.0f} | {wall:.1f} |"


# compressed exchanges on the device: streaming-diloco's mean on its communication thread,
# the pairwise exchange's codec
COMPRESSED = [("streaming-diloco", "int8"), ("adpsgd-random", "int8")]


def learner_table(check: Check) -> list[str]:
    size = check.size
    rows = [run_learners(algo, check, check.work / "learners" / algo) for algo in check.algos]
    rows += [run_learners(algo, check, check.work / "learners" / f"{algo}-{codec}", codec)
             for algo, codec in COMPRESSED if algo in check.algos]
    return [f"Each strategy for {size.learner_steps} steps of {size.batch_size} chunks per "
            f"learner, model {size.model}; frames/s summed over learners between their first "
            "and last metrics records; wall time includes start-up.", "",
            "| --algo | learners | exit | frames/s | wall s |", "|---|---|---|---|---|", *rows,
            ""]


@dataclass(frozen=True)
class Part:
    """One part of the check: its title, the function (of this module, looked up when it runs)
    that returns its markdown, and its estimated seconds on one H100 and at tiny size."""

    title: str
    function: str
    gpu_s: float
    tiny_s: float

    def cost(self, size: Size) -> float:
        return self.tiny_s if size.tiny else self.gpu_s


# Most important first; the GPU estimates are guesses until a GPU run records each part's time.
PARTS = [
    Part("CUDA tests", "cuda_tests", 40, 30),
    Part("BLSTM forward + backward in fp32, bf16 and fp16", "blstm_rates", 30, 5),
    Part("Trainer against a bare loop", "trainer_against_bare", 70, 25),
    Part("ADPSGD's exchange overlapped with the step", "exchange_overlap", 40, 15),
    Part("Every strategy's learners on the one device", "learner_table", 130, 70),
    Part("NG-SGD against SGD", "ngsgd", 25, 5),
    Part("Simulated learners together and one at a time", "simulator", 25, 5),
    Part("The network's scores on the device, and their disk", "scores_on_device", 60, 5),
]


@dataclass
class Outcome:
    """What became of one part: ``status`` is ok, failed or skipped."""

    part: Part
    status: str
    lines: list[str]
    seconds: float = 0.0

    def section(self) -> list[str]:
        took = f" ({self.seconds:.0f} s)" if self.status != "skipped" else " (skipped)"
        return [f"### {self.part.title}{took}", "", *self.lines]


def run_part(part: Part, check: Check, left: float) -> Outcome:
    """Run ``part`` if its estimate fits in ``left`` seconds; an exception is its one line."""
    if part.cost(check.size) > left:
        return Outcome(part, "skipped", [f"Skipped: estimated {part.cost(check.size):.0f} s, "
                                         f"{max(left, 0):.0f} s of the budget left.", ""])
    t0 = time.perf_counter()
    try:
        lines, status = globals()[part.function](check), "ok"
    except PartSkipped as exc:
        lines, status = [f"Skipped: {exc}.", ""], "skipped"
    except Exception as exc:  # one part's failure must not lose the others
        traceback.print_exc()
        lines, status = [f"FAILED: {type(exc).__name__}: {first_line(exc)}", ""], "failed"
    return Outcome(part, status, lines, time.perf_counter() - t0)


def nvidia_driver() -> str:
    """The NVIDIA driver's version (nvidia-smi's, else the kernel module's), or 'unknown'."""
    if shutil.which("nvidia-smi"):
        proc = subprocess.run(["nvidia-smi", "--query-gpu=driver_version",
                               "--format=csv,noheader"], capture_output=True, text=True,
                              check=False)
        if proc.returncode == 0 and proc.stdout.strip():
            return proc.stdout.split()[0]
    try:
        return Path("/proc/driver/nvidia/version").read_text().split("Module")[1].split()[0]
    except (OSError, IndexError):
        return "unknown"


def device_line(device: torch.device) -> str:
    """The device and the versions a GPU figure depends on, in one line."""
    if device.type != "cuda":
        cuda = (f"no CUDA device (torch built for CUDA {torch.version.cuda})"
                if torch.version.cuda else "a CPU-only torch")
        return (f"CPU ({platform.processor() or platform.machine()}), torch "
                f"{torch.__version__}, {cuda}")
    return (f"{torch.cuda.get_device_name(device)}, driver {nvidia_driver()}, torch "
            f"{torch.__version__}, CUDA {torch.version.cuda}, cuDNN "
            f"{torch.backends.cudnn.version()}")


def section(head: list[str], outcomes: list[Outcome], pending: list[Part],
            seconds: float) -> list[str]:
    """The generated section as it stands: the parts ended so far and those still to run."""
    skipped = [o.part.title for o in outcomes if o.status == "skipped"]
    failed = [o.part.title for o in outcomes if o.status == "failed"]
    state = (f"Not run yet (running, or stopped): {', '.join(p.title for p in pending)}."
             if pending else f"Finished in {seconds:.0f} s.")
    return [*head, state + (f" Skipped: {', '.join(skipped)}." if skipped else "")
            + (f" Failed: {', '.join(failed)}." if failed else ""), "",
            *[line for o in outcomes for line in o.section()]]


def run_check(check: Check, budget: float, head: list[str], out: Path | None) -> list[Outcome]:
    """Every part in order of importance, each printed and published as it ends."""
    t0 = time.monotonic()
    outcomes: list[Outcome] = []
    for i, part in enumerate(PARTS):
        outcome = run_part(part, check, budget - (time.monotonic() - t0))
        outcomes.append(outcome)
        print("\n".join(outcome.section()), flush=True)
        if out is not None:
            text = section(head, outcomes, PARTS[i + 1:], time.monotonic() - t0)
            write_generated(out, "\n".join(text) + "\n")
    return outcomes


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    publish_option(parser, __file__)  # with CUDA it publishes unasked
    parser.add_argument("--tiny", action="store_true",
                        help="the CPU smoke test even where CUDA is available (the test run's)")
    parser.add_argument("--budget", type=float, default=DEFAULT_BUDGET_S, metavar="SECONDS",
                        help="skip the parts (least important first) that would not fit "
                             f"(default {DEFAULT_BUDGET_S:.0f})")
    parser.add_argument("--algos", default="", metavar="A,B",
                        help="the strategies whose learners run (default every registered one "
                             "but single; a lease's rerun of a few)")
    args = parser.parse_args(argv)
    if args.budget <= 0:
        parser.error(f"--budget {args.budget:g}: give a positive number of seconds")
    algos = [a for a in args.algos.split(",") if a]
    unknown = [a for a in algos if a not in registry.algo_names() or a == "single"]
    if unknown:
        parser.error(f"--algos {args.algos}: no distributed strategy {', '.join(unknown)}")
    cuda = torch.cuda.is_available() and not args.tiny
    size, device = (GPU, torch.device("cuda")) if cuda else (TINY, torch.device("cpu"))
    host = torch.device("cuda") if torch.cuda.is_available() else device
    print(f"gpu-check: {device_line(host)}", flush=True)
    out = args.publish or (generated(__file__) if cuda else None)
    if not cuda:
        why = "--tiny" if args.tiny else "no CUDA device here"
        print(f"gpu-check: {why}; running the same checks at tiny size on the CPU"
              + (f" (written to {out})" if out else " (nothing written)"),
              flush=True)
    command = " ".join(["python -m bench.gpu_check", *(["--tiny"] if args.tiny else []),
                        f"--budget {args.budget:g}",
                        *([f"--algos {args.algos}"] if algos else [])])
    head = [HEADING, "", f"Device: {device_line(device)}; {time.strftime('%Y-%m-%d')}.", "",
            f"Command: `{command}` (`make gpu-check`). Parts in order of importance; a part "
            "whose estimated cost does not fit in what is left of the budget is skipped.", ""]
    with tempfile.TemporaryDirectory(prefix="asrdist-gpu-check-") as tmp:
        outcomes = run_check(Check(size, device, Path(tmp), algos), args.budget, head, out)
    failed = [o.part.title for o in outcomes if o.status == "failed"]
    failed += [line.split("|")[1].strip() if line.startswith("|") else line.split(":")[0]
               for o in outcomes for line in o.lines if "FAILED" in line
               and not line.startswith("FAILED")]
    if failed:
        sys.exit(f"gpu-check: failed: {', '.join(failed)} (see above)")


if __name__ == "__main__":
    main()
