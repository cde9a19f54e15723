"""The one command to run first on a machine with a GPU: what only a GPU shows, in one table set.

    make gpu-check          # = python -m bench.gpu_check --out bench/RESULTS.md

It runs, in one process tree:

1. the tests marked ``cuda`` (``pytest -m cuda``);
2. forward + backward frames/s of the paper-size BLSTM (6 x 512 cells per direction, 260
   inputs, a 256 bottleneck, 32,000 outputs) on 21-frame chunks, fp32 and bf16 autocast
   (cuDNN's LSTM on a GPU);
3. ``asrdist.train.trainer.train`` against a bare loop over the same model and batches
   (bench.train_throughput), on the device;
4. ADPSGD's weight staging per step (bench.staging_cost);
5. NG-SGD against SGD on the device (bench.ngsgd_throughput);
6. every registered multi-learner strategy as real ``asrdist-train`` processes sharing the
   one device: 2 learners (hadpsgd: 4, two super-learners of 2), backend gloo, since NCCL
   needs a device per learner;
7. the simulator's learners computed together against one at a time on the device: 1, 16 and
   64 learners of the mini recipe's BLSTM, host seconds per simulated step (bench.sim_cost).

Without CUDA it says so in one line and runs the same code at a tiny size on the CPU, so the
test run keeps it working; its figures are then printed, never written into RESULTS.md.
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import torch

from asrdist.models.blstm import BLSTM
from asrdist.parallel import registry
from asrdist.parallel.launch import BACKEND_ENV, free_port
from asrdist.train.metrics import metrics_path, read_metrics
from bench import ngsgd_throughput, sim_cost, staging_cost, train_throughput
from bench.projection import CHUNK, paper_model
from bench.results import publish

REPO = Path(__file__).resolve().parents[1]
HEADING = "## GPU check"


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
    ngsgd_steps: int

    def blstm(self) -> BLSTM:
        if self.name == "gpu":
            return paper_model()
        return BLSTM(self.corpus_dim, self.corpus_pdfs, layers=1, units=16)


GPU = Size("gpu", blstm_batch=256, reps=10, corpus_hours=0.5, corpus_dim=260,
           corpus_pdfs=32000, model={"layers": 6, "units": 512, "bottleneck": 256},
           batch_size=64, steps=60, ngsgd_steps=60)
TINY = Size("tiny", blstm_batch=4, reps=2, corpus_hours=0.05, corpus_dim=40, corpus_pdfs=120,
            model={"layers": 1, "units": 16, "bottleneck": 0}, batch_size=8, steps=12,
            ngsgd_steps=4)


def cuda_tests() -> list[str]:
    """The ``cuda``-marked tests' summary line (all skipped without a GPU)."""
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-m", "cuda", "-p",
                           "no:cacheprovider", "tests"], cwd=REPO, capture_output=True,
                          text=True, check=False)
    summary = (proc.stdout.strip().splitlines() or ["no output"])[-1].strip("= ")
    failed = proc.returncode not in (0, 5)  # 5: none collected
    return [f"`pytest -m cuda tests`: {summary}" + (" (FAILED)" if failed else ""), ""]


def blstm_rates(size: Size, device: torch.device) -> list[str]:
    """Forward + backward frames/s of the BLSTM, fp32 and bf16 autocast."""
    model = size.blstm().to(device)
    outputs = model.output.out_features
    x = torch.randn(size.blstm_batch, CHUNK, model.lstm.input_size, device=device)
    y = torch.randint(0, outputs, (size.blstm_batch * CHUNK,), device=device)
    rows = []
    fp32 = None
    for precision, dtype in (("fp32", None), ("bf16 autocast", torch.bfloat16)):

        def step(dtype: torch.dtype | None = dtype) -> None:
            model.zero_grad(set_to_none=True)
            with torch.autocast(device.type, dtype=dtype, enabled=dtype is not None):
                loss = torch.nn.functional.cross_entropy(model(x).reshape(-1, outputs), y)
            loss.backward()

        rate = size.blstm_batch * CHUNK / staging_cost.timed(step, device, size.reps)
        fp32 = fp32 or rate
        rows.append(f"| {precision} | {size.blstm_batch} | {rate:,.0f} | {rate / fp32:.2f} |")
    params = sum(p.numel() for p in model.parameters())
    return [f"BLSTM of {params / 1e6:.1f} M parameters, forward + backward of "
            f"{size.blstm_batch} chunks of {CHUNK} frames, mean of {size.reps} after a warm-up.",
            "", "| precision | chunks | frames/s | x fp32 |", "|---|---|---|---|", *rows, ""]


def trainer_against_bare(size: Size, device: torch.device, corpus: tuple[Path, Path],
                         work: Path) -> list[str]:
    """asrdist's trainer and a bare loop on the same model and batches."""
    options = {**size.model, "batch_size": size.batch_size, "device": str(device),
               "feature_masks": 0, "time_masks": 0,  # the bare loop masks nothing
               "log_every": 2}
    cfg = train_throughput._config(*corpus, work / "warm", size.steps, **options)
    batches = train_throughput.same_batches(cfg, size.steps)
    input_dim, num_pdfs = batches[0][0].shape[-1], size.corpus_pdfs
    train_throughput.bare_loop(cfg, batches[:3], input_dim, num_pdfs)  # warm-up
    bare = train_throughput.bare_loop(cfg, batches, input_dim, num_pdfs)
    end_to_end, steady, fixed = train_throughput.asrdist_run(
        train_throughput._config(*corpus, work / "trainer", size.steps, **options))
    return [f"{size.steps} steps of {size.batch_size} chunks, model {size.model}, the same "
            "batches preloaded for the bare loop (forward, cross-entropy, backward, clipping, "
            "SGD step).", "",
            "| loop | frames/s | x bare |", "|---|---|---|",
            f"| bare PyTorch loop | {bare:,.0f} | 1.00 |",
            f"| asrdist trainer, steady state | {steady:,.0f} | {steady / bare:.2f} |",
            f"| asrdist trainer, end to end (fixed cost {fixed:.1f} s) | {end_to_end:,.0f} | "
            f"{end_to_end / bare:.2f} |", ""]


def staging(size: Size, device: torch.device) -> list[str]:
    rows = staging_cost.measure(size.blstm().to(device), device, size.blstm_batch, size.reps)
    return ["| what | ms |", "|---|---|", *[f"| {what} | {s * 1e3:.2f} |" for what, s in rows],
            ""]


def ngsgd(size: Size, device: torch.device) -> list[str]:
    models = ngsgd_throughput.MODELS if size.name == "gpu" else {
        name: (config, chunk, 4) for name, (config, chunk, _) in
        list(ngsgd_throughput.MODELS.items())[:1]}
    rows = ngsgd_throughput.measure(models, size.ngsgd_steps, device)
    return [*ngsgd_throughput.TABLE_HEAD, *rows, ""]


def simulator(size: Size, device: torch.device) -> list[str]:
    if size.name == "gpu":
        rows = sim_cost.run_all(["ssgd", "adpsgd-random"], [1, 16, 64], steps=3, batch=128,
                                layers=2, units=128, together=64, device=device.type)
    else:  # in this process: the smoke test's time is short
        rows = [sim_cost.one("ssgd", 2, 1, batch=4, layers=1, units=8, together=together,
                             device=device.type) for together in (0, 2)]
    return [*sim_cost.table(rows), ""]


def learners_of(algo: str) -> tuple[int, list[str]]:
    """How many learners a strategy runs with here, and its extra options."""
    if algo == "hadpsgd":  # two super-learners of two: hierarchical, not adpsgd renamed
        return 4, ["--learners-per-node", "2"]
    return 2, []


def run_learners(algo: str, size: Size, device: torch.device, corpus: tuple[Path, Path],
                 out: Path) -> str:
    """One table row: ``algo`` as real asrdist-train processes on the one device."""
    n, extra = learners_of(algo)
    args = ["--data", str(corpus[0]), "--targets", str(corpus[1]), "--out", str(out),
            "--algo", algo, "--device", device.type, "--batch-size", str(size.batch_size),
            "--max-steps", str(size.steps), "--heldout-utts", "0", "--checkpoint-every", "0",
            "--log-every", "2", "--epochs", "100", "--cmvn", "utt", "--exchange-timeout", "120",
            *extra,
            *[f"--{k.replace('_', '-')}={v}" for k, v in size.model.items()]]
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("SLURM_", "PMI_", "OMPI_", "MASTER_", "RANK", "WORLD_SIZE"))}
    env |= {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(free_port()),
            "WORLD_SIZE": str(n), BACKEND_ENV: "gloo", "OMP_NUM_THREADS": "1",
            "PYTHONPATH": str(REPO)}
    train = str(Path(sys.executable).parent / "asrdist-train")
    t0 = time.perf_counter()
    procs = [subprocess.Popen([train, *args], env=env | {"RANK": str(r), "LOCAL_RANK": str(r)},
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
             for r in range(n)]
    errors = [p.communicate(timeout=600)[1] for p in procs]
    wall = time.perf_counter() - t0
    codes = [p.returncode for p in procs]
    if any(codes):
        line = next(e for e, c in zip(errors, codes, strict=True) if c).strip().splitlines()
        return f"| {algo} | {n} | FAILED {codes}: {line[-1] if line else ''} | | |"
    rate = 0.0
    for rank in range(n):
        train_records = [r for r in read_metrics(metrics_path(out, rank)) if r["kind"] == "train"]
        first, last = train_records[0], train_records[-1]
        rate += (last["frames"] - first["frames"]) / max(last["wall_s"] - first["wall_s"], 1e-9)
    return f"| {algo} | {n} | 0 | {rate:,.0f} | {wall:.1f} |"


def learner_table(size: Size, device: torch.device, corpus: tuple[Path, Path],
                  work: Path) -> list[str]:
    rows = [run_learners(algo, size, device, corpus, work / algo)
            for algo in registry.algo_names() if algo != "single"]
    return [f"Each strategy for {size.steps} steps of {size.batch_size} chunks per learner, "
            f"model {size.model}; frames/s summed over learners between their first and last "
            "metrics records; wall time includes start-up.", "",
            "| --algo | learners | exit | frames/s | wall s |", "|---|---|---|---|---|", *rows,
            ""]


def device_line(device: torch.device) -> str:
    if device.type != "cuda":
        return f"CPU ({platform.processor() or platform.machine()}), torch {torch.__version__}"
    return (f"{torch.cuda.get_device_name(device)}, torch {torch.__version__}, CUDA "
            f"{torch.version.cuda}, cuDNN {torch.backends.cudnn.version()}")


def check(size: Size, device: torch.device, work: Path) -> list[str]:
    """Every part's markdown, in order; each part prints as it finishes."""
    corpus = train_throughput.write_corpus(work / "corpus", size.corpus_hours,
                                           dim=size.corpus_dim, num_pdfs=size.corpus_pdfs)
    parts = [("CUDA tests", cuda_tests),
             ("BLSTM forward + backward", lambda: blstm_rates(size, device)),
             ("Trainer against a bare loop",
              lambda: trainer_against_bare(size, device, corpus, work)),
             ("ADPSGD exchange staging per step", lambda: staging(size, device)),
             ("NG-SGD against SGD", lambda: ngsgd(size, device)),
             ("Every strategy's learners on the one device",
              lambda: learner_table(size, device, corpus, work / "learners")),
             ("Simulated learners together and one at a time",
              lambda: simulator(size, device))]
    lines = []
    for title, part in parts:
        t0 = time.perf_counter()
        body = part()
        section = [f"### {title}", "", *body]
        print("\n".join(section) + f"({time.perf_counter() - t0:.0f} s)\n", flush=True)
        lines += section
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", help="RESULTS.md to write the section into (GPU only)")
    parser.add_argument("--tiny", action="store_true",
                        help="the CPU smoke test even where CUDA is available (the test run's)")
    args = parser.parse_args()
    cuda = torch.cuda.is_available() and not args.tiny
    if not cuda:
        why = "--tiny" if args.tiny else "no CUDA device here"
        print(f"gpu-check: {why}; running the same checks at tiny size on the CPU (nothing "
              "written to RESULTS.md)", flush=True)
    size, device = (GPU, torch.device("cuda")) if cuda else (TINY, torch.device("cpu"))
    with tempfile.TemporaryDirectory(prefix="asrdist-gpu-check-") as tmp:
        lines = check(size, device, Path(tmp))
    failed = [line.split("|")[1].strip() if line.startswith("|") else line.split(":")[0]
              for line in lines if "FAILED" in line]
    section = [HEADING, "", f"Device: {device_line(device)}; {time.strftime('%Y-%m-%d')}.",
               "", "Command: `make gpu-check` (`python -m bench.gpu_check --out "
               "bench/RESULTS.md`)", "", *lines]
    publish(section, args.out if cuda else None)
    if failed:
        sys.exit(f"gpu-check: failed: {', '.join(failed)} (see above)")


if __name__ == "__main__":
    main()
