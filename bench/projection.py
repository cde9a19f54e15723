"""Projection: SWB-2000 (16 epochs) training time at 16-128 V100s per strategy, from a model
calibrated to the papers' own single-GPU time, beside the papers' figures.

Measured here: the paper-size BLSTM (6 bidirectional layers of 512 cells per direction, 260
inputs, a 256 bottleneck, 32,000 outputs: about 43 M parameters) forward and backward on
21-frame chunks on this CPU, against a plain GEMM's FLOP rate on the same CPU; and, from the
network study (``bench/results/network.json``), how much of a link's rate a gloo weight swap
achieves and how much of each strategy's communication hid behind compute. Everything else is
an assumption, listed in :data:`ASSUMPTIONS` and printed with the table.

Calibration (:data:`CALIBRATION`): scaled by GEMM rates alone, the CPU timing makes one GPU
train 16 epochs in about 3 days, where IBM's blog says "one week"; the compute time per frame
is therefore taken from the papers: one week over 16 epochs of SWB-2000's frames (the factor
over the GEMM-scaled figure is printed), and checked against the papers' one small-cluster
time, 14 h for ADPSGD on 16 P100 (ICASSP'19), with the P100 slower than the V100 by their
fp32 peak rates. The global batch per strategy is study 1's largest batch within 2 % of its
single learner (Study 1's generated section, ``bench/results/large_batch.md``), as a multiple
of its baseline batch times the papers' baseline of 256 chunks, where study 1 found one; else
the papers' (IBM blog: 4096 for SSGD, 12,288 for ADPSGD and its variants).

Model, per learner step (local batch ``b`` chunks of 21 frames, ``g`` GPUs per node, model of
``M`` bytes, inter-node bandwidth ``B`` = link rate x measured swap efficiency):

- compute ``C = b * 21 * t_frame``, ``t_frame`` = the BLSTM's measured CPU time per frame
  (largest batch timed) x this CPU's GEMM rate / a V100's: the BLSTM is taken to reach the
  same fraction of a GEMM's rate on the GPU as here (pessimistic: a GPU batch is larger);
- ssgd: ring allreduce across nodes, ``2 M (N-1)/N / B``, overlapping the backward (2/3 C);
- adpsgd fixed / delay1 (ring laid out node by node): about one swap ``M / B`` per step
  crosses each node's link; random ring: ``g (N-g)/(N-1)`` swaps share it; overlapping the
  forward and backward (delay1: the whole step);
- hadpsgd: a node allreduce over NVLink, ``2 M (g-1)/g / B_nvlink``, overlapping the
  backward, then one leader swap per node across, overlapping the step;
- exposed communication ``max(comm - h * window, (1 - h) * comm)`` with ``h`` the hidden
  fraction the network study measured for that strategy on its faster link.

    .venv/bin/python -m bench.projection --publish
"""

from __future__ import annotations

import argparse
import json
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from asrdist.errors import AsrdistError
from asrdist.models.blstm import BLSTM
from bench.results import generated, publish, publish_option, shown

NETWORK = generated("network", ".json")
CHUNK = 21
ASSUMPTIONS: dict[str, Any] = {
    "hours": 1975,  # SWB-2000: 262 h SWB-1 + 1,698 h Fisher + 15 h CallHome (papers.md §5)
    "frames_per_s": 100,  # 10 ms frame shift
    "epochs": 16,
    "v100_gemm_tflops": 14.0,  # sustained fp32 SGEMM of a V100 SXM2 (peak 15.7)
    "gpus_per_node": 4,  # IBM AC922: 4 or 6 V100 per node; 4 taken
    "link_gbit": 100.0,  # the papers' Ethernet
    "nvlink_gbyte_s": 50.0,  # effective per direction, node allreduce
    "max_local_batch": 256,  # chunks per GPU (memory)
    "batch_ssgd": 4096,  # largest global batch (chunks) SSGD converges with (IBM blog)
    "batch_adpsgd": 12288,  # ADPSGD / H-ADPSGD / delay-by-one: 3x (Interspeech'19)
    "base_batch": 256,  # the papers' single-GPU batch, chunks (papers.md §5, recalled)
}
# The papers' own times the compute model is calibrated to and checked against (papers.md §2)
CALIBRATION: dict[str, Any] = {
    "one_gpu_days": 7.0,  # "one week" for 16 epochs on one GPU: IBM Research blog, Oct 2019
    "p100_gpus": 16,  # ADPSGD on 16 P100 in 14 h: ICASSP'19, arXiv:1904.04956 (abstract)
    "p100_hours": 14.0,
    "p100_slowdown": 15.7 / 10.6,  # V100 over P100 fp32 peak (SXM2); 900/732 by memory bandwidth
}
STRATEGIES = ["ssgd", "adpsgd-fixed", "adpsgd-random", "adpsgd-delay1", "hadpsgd"]
# The papers' wall times (papers.md), beside the row of the strategy they used: hours, source.
PAPERS = {
    (16, "adpsgd-fixed"): (14.0, "ADPSGD on 16 P100, not V100 (ICASSP'19)"),
    (32, "hadpsgd"): (11.5, "HYBRID (ICASSP'19)"),
    (64, "hadpsgd"): (5.2, "H-ADPSGD (Interspeech'19)"),
    (64, "adpsgd-delay1"): (2.28, "ICASSP'20"),
    (128, "adpsgd-delay1"): (1.98, "ICASSP'20; TASLP'21: < 2 h"),
}
STUDY1 = generated("large_batch")  # Study 1's section, its batch limits


def paper_model() -> BLSTM:
    return BLSTM(260, 32000, layers=6, units=512, bottleneck=256)


def flops_per_frame(model: torch.nn.Module) -> float:
    """Training FLOPs per frame: every weight takes a multiply-add per frame in the forward
    pass (2 FLOPs) and two in the backward (input and weight gradients: 4 FLOPs)."""
    return 6.0 * sum(p.numel() for p in model.parameters() if p.dim() > 1)


def _best(fn: Callable[[], object], reps: int) -> float:
    """The fastest of ``reps`` timed calls after a warm-up: on a shared machine the minimum
    is the least disturbed by other jobs."""
    fn()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def gemm_rate(reps: int, n: int = 1024) -> float:
    """FLOP/s of a float32 n x n matrix product on this CPU (the threads torch uses)."""
    a, b = torch.randn(n, n), torch.randn(n, n)
    return 2 * n**3 / _best(lambda: a @ b, reps)


def blstm_seconds_per_frame(model: torch.nn.Module, batch: int, reps: int) -> float:
    """Forward and backward of ``batch`` 21-frame chunks on this CPU, per frame."""
    x = torch.randn(batch, CHUNK, 260)
    y = torch.randint(0, 32000, (batch * CHUNK,))

    def step() -> None:
        model.zero_grad(set_to_none=True)
        loss = torch.nn.functional.cross_entropy(model(x).reshape(-1, 32000), y)
        loss.backward()

    return _best(step, reps) / (batch * CHUNK)


def network_calibration(path: Path) -> dict[str, Any]:
    """Swap efficiency (achieved bytes/s over the tc rate) and hidden fraction per strategy,
    both from the network study's fastest link."""
    if not path.is_file():
        raise AsrdistError(f"{path}: missing; run `make network` (bench.studies.network) first")
    data = json.loads(path.read_text())
    rates = {r: _bits(r) for r in data["probes"]}
    fast = max(rates, key=rates.__getitem__)
    eff = [data["bytes"] * 8 / p["swap_cross"] / rates[r] for r, p in data["probes"].items()]
    hidden = {row["algo"]: row["hidden"] for row in data["rows"] if row["rate"] == fast}
    return {"swap_efficiency": sum(eff) / len(eff), "hidden": hidden, "rate": fast}


def _bits(rate: str) -> float:
    units = {"kbit": 1e3, "mbit": 1e6, "gbit": 1e9}
    for unit, scale in units.items():
        if rate.lower().endswith(unit):
            return float(rate[: -len(unit)]) * scale
    raise AsrdistError(f"network.json: rate {rate!r} is not NNkbit/mbit/gbit")


def paper_batch(algo: str, a: dict[str, Any]) -> int:
    """The papers' largest global batch (chunks) for ``algo``."""
    return a["batch_ssgd"] if algo == "ssgd" else a["batch_adpsgd"]


def step_time(algo: str, n: int, t_frame: float, model_bytes: float, net: dict[str, Any],
              a: dict[str, Any], cap: int | None = None) -> tuple[float, float, float]:
    """(compute, exposed communication, global batch) of one step of one learner; ``cap`` is
    the largest global batch (default: the papers')."""
    g = a["gpus_per_node"]
    cap = cap or paper_batch(algo, a)
    local = min(a["max_local_batch"], cap // n)
    compute = local * CHUNK * t_frame
    bw = a["link_gbit"] * 1e9 / 8 * net["swap_efficiency"]
    swap = model_bytes / bw
    h = net["hidden"].get(algo, 0.0)
    if algo == "ssgd":
        comm, window = 2 * model_bytes * (n - 1) / n / bw, compute * 2 / 3
    elif algo == "hadpsgd":
        node = 2 * model_bytes * (g - 1) / g / (a["nvlink_gbyte_s"] * 1e9)
        exposed_node = max(node - h * compute * 2 / 3, (1 - h) * node)
        leader = max(swap - h * (compute + exposed_node), (1 - h) * swap)
        return compute, exposed_node + leader, local * n
    else:
        load = g * (n - g) / (n - 1) if algo == "adpsgd-random" else 1.0
        comm, window = swap * max(1.0, load), compute
    return compute, max(comm - h * window, (1 - h) * comm), local * n


def project(t_frame: float, model_bytes: float, net: dict[str, Any], a: dict[str, Any],
            caps: dict[str, int] | None = None) -> list[dict[str, Any]]:
    """Every (GPUs, strategy) row; ``caps``: global batch limits replacing the papers'."""
    frames = a["hours"] * 3600 * a["frames_per_s"]
    rows = []
    for n in (16, 32, 64, 128):
        for algo in STRATEGIES:
            cap = (caps or {}).get(algo)
            compute, comm, batch = step_time(algo, n, t_frame, model_bytes, net, a, cap)
            steps = frames / (batch * CHUNK)
            epoch_h = steps * (compute + comm) / 3600
            rows.append({"gpus": n, "algo": algo, "batch": batch, "compute_ms": compute * 1e3,
                         "comm_ms": comm * 1e3, "epoch_h": epoch_h,
                         "total_h": epoch_h * a["epochs"]})
    return rows


def calibrated_t_frame(c: dict[str, Any], a: dict[str, Any]) -> float:
    """Seconds per training frame on one V100 that make 16 epochs of SWB-2000 last the
    papers' single-GPU time."""
    frames = a["hours"] * 3600 * a["frames_per_s"] * a["epochs"]
    return c["one_gpu_days"] * 86400 / frames


def study1_limits(path: Path) -> dict[str, int | None]:
    """Study 1's largest global batch within 2 % of its single learner per strategy, as a
    multiple of its baseline batch (the largest over its learner counts; None: no batch was
    within 2 %); {} when ``path`` has no Study 1 table."""
    text = path.read_text() if path.is_file() else ""
    m = re.search(r"^## Study 1.*?(?=^## |\Z)", text, re.S | re.M)
    base = re.search(r"baseline at batch (\d+)", m.group(0)) if m else None
    if m is None or base is None:
        return {}
    limits: dict[str, int | None] = {}
    for line in m.group(0).splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 3 or cells[0] not in STRATEGIES:
            continue
        last = _bracketed(cells[-1])
        if last.isdigit():
            multiple = int(last) // int(base.group(1))
            limits[cells[0]] = max(limits.get(cells[0]) or 0, multiple)
        elif last == "none":
            limits.setdefault(cells[0], None)
    return limits


def _bracketed(cell: str) -> str:
    """A partial row's "X of [a, b, ...] tried" as "X" when a larger batch was tried (and
    failed), so X is a limit of its grid as a full row's is; else the cell unchanged (a
    bound such as "256 of [256] tried" is not a limit)."""
    m = re.fullmatch(r"(\d+) of \[([\d, ]+)\] tried", cell)
    if m and int(m.group(1)) < max(int(b) for b in m.group(2).split(",")):
        return m.group(1)
    return cell


def implied_factor(t_gemm: float, model_bytes: float, net: dict[str, Any], a: dict[str, Any],
                   c: dict[str, Any], caps: dict[str, int]) -> float:
    """The calibration factor that the 16-P100 ADPSGD run alone implies: the multiple of the
    GEMM-scaled V100 time per frame that, slowed to a P100, projects the paper's hours."""
    def hours(f: float) -> float:
        rows = project(t_gemm * f * c["p100_slowdown"], model_bytes, net, a, caps)
        return next(r["total_h"] for r in rows
                    if (r["gpus"], r["algo"]) == (c["p100_gpus"], "adpsgd-fixed"))

    lo, hi = 0.01, 100.0
    for _ in range(60):  # hours(f) grows with f: bisection
        mid = (lo * hi) ** 0.5
        lo, hi = (mid, hi) if hours(mid) < c["p100_hours"] else (lo, mid)
    return (lo * hi) ** 0.5


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batches", default="2,8", help="CPU chunk batches to time the BLSTM at")
    ap.add_argument("--reps", type=int, default=3, help="timings per batch (the fastest counts)")
    ap.add_argument("--threads", type=int, default=1, help="CPU threads (the machine is shared)")
    ap.add_argument("--network", default=str(NETWORK), help="the network study's JSON")
    ap.add_argument("--results", default=str(STUDY1),
                    help="Study 1's generated section, which gives the batch limits")
    publish_option(ap, __file__)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    a, c = ASSUMPTIONS, CALIBRATION
    net = network_calibration(Path(args.network))
    model = paper_model()
    params = sum(p.numel() for p in model.parameters())
    fpf = flops_per_frame(model)
    batches = [int(b) for b in args.batches.split(",")]
    cpu = {b: blstm_seconds_per_frame(model, b, args.reps) for b in batches}
    rate = gemm_rate(20)  # right after the BLSTM: the same load
    batch, t_cpu = max(cpu.items())
    t_gemm = t_cpu * rate / (a["v100_gemm_tflops"] * 1e12)
    t_frame = calibrated_t_frame(c, a)
    factor = t_frame / t_gemm
    frames = a["hours"] * 3600 * a["frames_per_s"]
    gemm_days = frames * a["epochs"] * t_gemm / 86400
    limits = study1_limits(Path(args.results))
    caps = {k: m * a["base_batch"] for k, m in limits.items() if m is not None}
    model_bytes = params * 4
    rows = project(t_frame, model_bytes, net, a, caps)
    gemm_rows = project(t_gemm, model_bytes, net, a, caps)
    check = {}
    for name, slowdown in (("peak", c["p100_slowdown"]), ("bandwidth", 900 / 732)):
        p100 = project(t_frame * slowdown, model_bytes, net, a, caps)
        check[name] = next(r["total_h"] for r in p100
                           if (r["gpus"], r["algo"]) == (c["p100_gpus"], "adpsgd-fixed"))
    f16 = implied_factor(t_gemm, model_bytes, net, a, c, caps)
    measured = [k for k, m in limits.items() if m is not None]
    none_within = [k for k, m in limits.items() if m is None]
    lines = [
        "## Projection: SWB-2000, 16 epochs, 16-128 V100s", "",
        f"Model: the paper-size BLSTM, {params / 1e6:.1f} M parameters ({params * 4 / 1e6:.0f}"
        f" MB in fp32), {fpf / 1e6:.0f} MFLOP per training frame (6 x weights). Measured on "
        f"this CPU ({args.threads} thread, shared machine, fastest of {args.reps}): GEMM "
        f"{rate / 1e9:.1f} GFLOP/s; "
        "the BLSTM's forward+backward " + ", ".join(
            f"{t * 1e3:.1f} ms/frame at {b} chunks ({fpf / t / 1e9:.1f} GFLOP/s, "
            f"{fpf / t / rate:.0%} of GEMM)" for b, t in cpu.items()) + ". "
        f"Scaled to a V100 by GEMM rates: {t_cpu * 1e3:.1f} ms x {rate / 1e9:.1f} GFLOP/s / "
        f"{a['v100_gemm_tflops']:g} TFLOP/s = {t_gemm * 1e6:.0f} us/frame ({batch} chunks; "
        f"the BLSTM at the same {fpf / t_cpu / rate:.0%} of GEMM speed as here), i.e. "
        f"{gemm_days:.1f} days for 16 epochs on one GPU. Not run on a GPU (none was lent to "
        "this task): the paper-size BLSTM's GPU timings are not measured.",
        "",
        "Calibration to the papers. (1) Single GPU: IBM's Research blog (Oct 2019, with "
        "ICASSP'19, arXiv:1904.04956; `papers.md` §2) gives 'one week' for the single-GPU "
        f"baseline; {c['one_gpu_days']:g} days over 16 epochs of {a['hours']} h "
        f"({frames * a['epochs']:.3g} frames) is {t_frame * 1e6:.0f} us per training frame, "
        f"{factor:.2f}x the GEMM-scaled figure: the compute model is calibrated by this factor "
        "(the table's compute uses it; the GEMM-scaled hours stay beside it). "
        f"(2) Check, small cluster: ADPSGD on {c['p100_gpus']} P100 in {c['p100_hours']:g} h "
        "(ICASSP'19 abstract, arXiv:1904.04956; `papers.md` §2). With the calibrated V100 "
        f"time per frame slowed to a P100 by the fp32 peak ratio 15.7/10.6 = "
        f"{c['p100_slowdown']:.2f}, the model projects {check['peak']:.1f} h for that run "
        f"({check['bandwidth']:.1f} h with the memory-bandwidth ratio 900/732 = 1.23); the "
        f"factor that this point alone implies is {f16:.2f}x (against {factor:.2f}x from the "
        "single GPU), so the two papers' figures agree with one compute model to within "
        f"{abs(check['peak'] / c['p100_hours'] - 1):.0%}. Uncertainty: 'one week' is a round "
        "figure (6 to 8 days moves every compute time by -14 % to +14 %); the text read "
        "(abstracts and the blog, `papers.md` §0) does not name the single GPU's model or "
        "the 16-P100 run's batch and epochs (taken as a V100, 16 epochs and the papers' 4096 "
        "chunks); the P100/V100 ratio for a BLSTM lies between the two ratios above. The "
        "factor folds in whatever the GEMM scaling leaves out: recurrent steps that do not "
        "fill a GPU, data loading, checkpoints, evaluation.",
        "",
        f"Network, from the network study ({shown(args.network, 'the --network JSON')}): a "
        f"gloo weight swap reached {net['swap_efficiency']:.0%} of the tc link rate; taken "
        f"as the fraction of {a['link_gbit']:g} Gb/s Ethernet a swap or allreduce gets. "
        f"Measured hidden fractions (at {net['rate']}): " + ", ".join(
            f"{k} {v:.0%}" for k, v in net["hidden"].items()) + ".", "",
        "Batch limits: study 1's largest global batch within 2 % of its single learner, as a "
        f"multiple of its baseline times the papers' baseline of {a['base_batch']} chunks, "
        "where it found one" + (f" ({', '.join(measured)})" if measured else "") + "; else "
        "the papers' (IBM blog: 4096 chunks for SSGD, 12,288 for ADPSGD and its variants). "
        + (f"Study 1 has no batch within 2 % for {', '.join(none_within)}, not even its "
           "smallest, so the papers' limits stay for them. " if none_within else "")
        + "A strategy study 1 ran at a few batches counts where one was within 2 % and a "
        "larger one tried was not; one with no such pair (no limit in its table, or none "
        "within 2 % of those tried) keeps the papers' limit. A limit from study 1 is a point "
        "of its grid: the true one lies between it and the next batch tried.", "",
        "Assumptions: " + "; ".join(f"{k} = {v}" for k, v in a.items()) + ". Every strategy "
        "is taken to need the same 16 epochs; GPU efficiency does not fall at small local "
        "batches (optimistic at 128 GPUs, where SSGD's local batch is 32 chunks); "
        "learners equally fast; ma is not modelled.",
        "", "Command: `.venv/bin/python -m bench.projection --publish` "
        "(`make projection`, after `make network`)", "",
        "| GPUs | strategy | global batch (chunks) | compute/step (ms) | exposed comm/step (ms)"
        " | 16 epochs, GEMM-scaled (h) | 16 epochs, calibrated (h) | papers (h) | "
        "calibrated / papers |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r, g in zip(rows, gemm_rows, strict=True):
        paper = PAPERS.get((r["gpus"], r["algo"]))
        source = "study 1" if r["algo"] in caps else "papers"
        seen = f"{paper[0]:g} h, {paper[1]}" if paper else ""
        ratio = f"{r['total_h'] / paper[0]:.2f}" if paper else ""
        if (r["gpus"], r["algo"]) == (c["p100_gpus"], "adpsgd-fixed"):  # the paper's P100s
            ratio = f"{check['peak'] / c['p100_hours']:.2f} (as P100: {check['peak']:.1f} h)"
        lines.append(f"| {r['gpus']} | {r['algo']} | {r['batch']} ({source}) | "
                     f"{r['compute_ms']:.0f} | {r['comm_ms']:.1f} | {g['total_h']:.1f} | "
                     f"{r['total_h']:.1f} | {seen} | {ratio} |")
    publish(lines, args.publish)


if __name__ == "__main__":
    main()
