"""Issue 41's "silently wrong" and traceback rows, acted out for real through the CLIs: each
bad input or state is refused in one ``Error:`` line naming what is wrong (or, for PowerSGD,
no longer refused), and leaves no output that looks complete.

Each probe takes an empty scratch dir and returns ``(ok, detail)``; ``python -m bench.probes
errors`` prints them as rows.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from unittest import mock

# isort: split
import kaldi_hmm_gmm  # noqa: F401  (first of the Kaldi wheels, as the test suite loads them)

# isort: split
# before kaldilm, which asrdist-lmrescore loads: decoding lattices in a process that imported
# kaldilm first would hang
import kaldi_decoder  # noqa: F401
import torch
from click.testing import Result

from asrdist import stage
from asrdist.cli.compare import main as compare_main
from asrdist.cli.compute_loglikes import main as loglikes_main
from asrdist.cli.decode import main as decode_main
from asrdist.cli.lmrescore import main as lmrescore_main
from asrdist.cli.simulate import main as simulate_main
from asrdist.cli.train import main as train_main
from asrdist.decode.graph import make_graph
from asrdist.parallel.launch.rendezvous import free_port
from asrdist.testing import make_corpus
from asrdist.testing.planted import TINY, interrupted_run, invoke
from asrdist.testing.tiny_system import (
    TinySystem,
    make_system,
    write_identity_nnet,
    write_test_data,
)
from asrdist.train.metrics import metrics_path, read_metrics
from bench.probes.refusal import last_error_line, said

# a comparison small enough for seconds: asrdist-compare's own tests' sizes
_SIM_TINY = ("--learners", "2", "--batch-size", "4", "--chunk-len", "5", "--heldout-utts", "4",
             "--layers", "1", "--units", "8", "--epochs", "1", "--evals", "3", "--lr", "0.3",
             "--lr-scaling", "none", "--latency", "0.05", "--bandwidth", "1e5")
SENTENCES = {"v1-u1": "dog sit on cat", "v1-u2": "cat sat", "v2-u3": "sit", "v2-u4": "dog sat"}
WORDLESS_ARPA = "\\data\\\nngram 1=2\n\n\\1-grams:\n-0.3\t</s>\n-99\t<s>\n\n\\end\\\n"


def powersgd_ssgd(scratch: Path) -> tuple[bool, str]:
    """train: --compress powersgd runs with ssgd, refused for ma"""
    data, targets = make_corpus(scratch / "corpus")
    common = ["--data", data, "--targets", targets, *TINY, "--max-steps=2", "--compress",
              "powersgd"]
    ssgd = invoke(train_main, *common, "--out", scratch / "ssgd", "--algo", "ssgd")
    ma = invoke(train_main, *common, "--out", scratch / "ma", "--algo", "ma")
    line = last_error_line(ma)
    ok = ssgd.exit_code == 0 and line is not None and "only ssgd takes it" in line
    return ok, f"ssgd exit {ssgd.exit_code}; ma: {line or said(ma)}"


def every_learner_lost(scratch: Path) -> tuple[bool, str]:
    """compare: every learner lost is one line, or a failed row"""
    data, targets = make_corpus(scratch / "corpus", num_utts=24)
    args = ["--data", data, "--targets", targets, "--algo", "adpsgd-random", "--scenario",
            "lost:0@0.5,1@0.5", "--seeds", "1", *_SIM_TINY]
    alone = invoke(compare_main, *args, "--out", scratch / "alone")
    given = invoke(compare_main, *args, "--out", scratch / "given", "--target-ce", "9",
                   "--budget", "1")
    line = last_error_line(alone)
    table = scratch / "given" / "table.md"
    failed_row = given.exit_code == 0 and "(1 failed)" in table.read_text()
    ok = line is not None and "failed in every run" in line and failed_row
    row = "a failed row" if failed_row else said(given)
    return ok, f"{line or said(alone)}; with a target: {row}"


def simulate_memory(scratch: Path) -> tuple[bool, str]:
    """simulate: 100000 learners refused with the memory estimate"""
    data, targets = make_corpus(scratch / "corpus")
    out = scratch / "sim.json"
    result = invoke(simulate_main, "--data", data, "--targets", targets, "--out", out,
                    "--learners", "100000")
    line = last_error_line(result)
    ok = line is not None and "GB available" in line and not out.exists()
    return ok, line or said(result)


def nested_checkpoint_entry(scratch: Path) -> tuple[bool, str]:
    """checkpoint whose rng entry lacks numpy: one line naming both"""
    resume, newest = interrupted_run(scratch)
    state = torch.load(newest, weights_only=True)
    del state["rng"]["numpy"]
    torch.save(state, newest)
    line = last_error_line(invoke(train_main, *resume))
    ok = line is not None and str(newest) in line and "rng entry lacks 'numpy'" in line
    return ok, line or "no one-line error"


def _system(scratch: Path, kind: str) -> TinySystem:
    """The tiny decoding system with its graph (root/graph) and test data (root/test) of
    ``kind`` (gmm, or nnet with root/final.pt)."""
    system = make_system(scratch / "sys")
    make_graph(system.lang, system.mono / "final.mdl", system.train_text,
               system.root / "graph")
    write_test_data(system, system.root / "test", SENTENCES, kind)
    if kind == "nnet":
        write_identity_nnet(system, system.root / "final.pt")
    return system


def _kept_scores(system: TinySystem, out: Path) -> Path:
    """asrdist-compute-loglikes of the test set into ``out``: its loglikes.scp."""
    done = invoke(loglikes_main, "--model", system.root / "final.pt", "--data",
                  system.root / "test", "--out", out)
    if done.exit_code != 0:
        raise RuntimeError(f"compute-loglikes failed: {done.output[-2000:]}")
    return out / "loglikes.scp"


def _decode(system: TinySystem, out: Path, *scorer: object) -> Result:
    return invoke(decode_main, "--graph", system.root / "graph", "--data",
                  system.root / "test", "--out", out, *scorer)


def _decode_kept(system: TinySystem, scp: Path, out: Path) -> Result:
    return _decode(system, out, "--loglikes", scp, "--trans-mdl", system.mono / "final.mdl")


def loglikes_twice(scratch: Path) -> tuple[bool, str]:
    """decode: an id twice in loglikes.scp, one line naming both"""
    system = _system(scratch, "nnet")
    scp = _kept_scores(system, scratch / "post")
    lines = scp.read_text().splitlines()
    first, second = lines[0].split()[0], lines[1].split()[1]
    scp.write_text("\n".join([*lines, f"{first} {second}"]) + "\n")
    result = _decode_kept(system, scp, scratch / "dec")
    line = last_error_line(result)
    ok = line is not None and str(scp) in line and f"duplicate key {first}" in line \
        and not (scratch / "dec" / "text").exists()
    return ok, line or said(result)


def loglikes_cut(scratch: Path) -> tuple[bool, str]:
    """decode: loglikes.ark cut mid-matrix, one line naming it"""
    system = _system(scratch, "nnet")
    scp = _kept_scores(system, scratch / "post")
    ark = scp.with_name("loglikes.ark")
    ark.write_bytes(ark.read_bytes()[:-40])
    last = scp.read_text().splitlines()[-1].split()[0]
    result = _decode_kept(system, scp, scratch / "dec")
    line = last_error_line(result)
    ok = line is not None and str(ark) in line and f"utterance {last}" in line
    return ok, line or said(result)


def _decoded_lattices(scratch: Path) -> tuple[TinySystem, Path]:
    """The GMM decode of the tiny system's test set into scratch/dec (its lattices and its
    graph's words.txt)."""
    system = _system(scratch, "gmm")
    decoded = _decode(system, scratch / "dec", "--gmm", system.mono / "final.mdl")
    if decoded.exit_code != 0:
        raise RuntimeError(f"decode failed: {decoded.output[-2000:]}")
    return system, scratch / "dec"


def _rescore(system: TinySystem, lang: Path, lm: Path, decoded: Path, out: Path) -> Result:
    return invoke(lmrescore_main, lang, lm, system.root / "test", decoded, out)


def lmrescore_other_graph(scratch: Path) -> tuple[bool, str]:
    """lmrescore: lattices of a graph of other words, one line"""
    system, decoded = _decoded_lattices(scratch)
    other = scratch / "other_lang"
    shutil.copytree(system.root / "graph", other)
    words = other / "words.txt"
    words.write_text(words.read_text().replace("cat ", "kitten "))
    out = scratch / "rescored"
    result = _rescore(system, other, other / "lm.arpa", decoded, out)
    line = last_error_line(result)
    ok = line is not None and str(decoded / "words.txt") in line and not out.exists()
    return ok, line or said(result)


def lmrescore_all_dropped(scratch: Path) -> tuple[bool, str]:
    """lmrescore: every lattice dropped, one line, no done marker"""
    system, decoded = _decoded_lattices(scratch)
    wordless = scratch / "wordless.arpa"
    wordless.write_text(WORDLESS_ARPA)
    out = scratch / "rescored"
    result = _rescore(system, system.root / "graph", wordless, decoded, out)
    line = last_error_line(result)
    left = sorted(p.name for p in out.iterdir() if p.name != "log") if out.is_dir() else []
    ok = line is not None and "every one of its" in line and not left
    return ok, f"{line or said(result)}; left in the output dir: {left or 'nothing'}"


@contextlib.contextmanager
def _full_disk(path: Path, mode: str = "w") -> Iterator[object]:
    """A marker's writer on a disk that is full."""
    raise OSError(errno.ENOSPC, "No space left on device")
    yield


def decode_disk_full(scratch: Path) -> tuple[bool, str]:
    """decode: a full disk at the done marker names the file"""
    system = _system(scratch, "gmm")
    out = scratch / "dec"
    with mock.patch.object(stage, "atomic_write", _full_disk):
        result = _decode(system, out, "--gmm", system.mono / "final.mdl")
    line = last_error_line(result)
    ok = line is not None and str(out / ".decode.done") in line
    return ok, line or said(result)


# an elastic run of 3 tiny learners, long enough to lose one on the way
_ELASTIC = ["--layers=1", "--units=8", "--chunk-len=10", "--batch-size=4", "--shuffle-buffer=16",
            "--heldout-utts=2", "--lr-ref-batch=8", "--log-every=1", "--epochs=50",
            "--max-steps=120", "--checkpoint-every=40", "--exchange-timeout=5",
            "--distance-every=0", "--keep-checkpoints=1", "--algo=adpsgd-random", "--elastic"]


def _learners(args: list[object], out: Path, world: int) -> list[subprocess.Popen]:
    """``world`` asrdist-train processes with the environment torchrun gives them, each's
    stderr in out/errR.txt."""
    out.mkdir(parents=True)
    port = free_port()
    procs = []
    for rank in range(world):
        env = {**os.environ, "RANK": str(rank), "WORLD_SIZE": str(world),
               "LOCAL_RANK": str(rank), "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port),
               "OMP_NUM_THREADS": "1"}
        with open(out / f"err{rank}.txt", "w") as err:
            procs.append(subprocess.Popen(
                [sys.executable, "-m", "asrdist.cli.train", *map(str, args)], env=env,
                stdout=subprocess.DEVNULL, stderr=err))
    return procs


def _at_step(out: Path, step: int, limit_s: float = 120) -> bool:
    """Whether learner 0 logged ``step`` within ``limit_s``."""
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        path = metrics_path(out, 0)
        records = read_metrics(path) if path.exists() else []
        if any(r["kind"] == "train" and r["step"] >= step for r in records):
            return True
        time.sleep(0.1)
    return False


def elastic_lost_learner(scratch: Path) -> tuple[bool, str]:
    """train --elastic: a learner killed is in final.pt's record"""
    data, targets = make_corpus(scratch / "corpus")
    out = scratch / "run"
    procs = _learners(["--data", data, "--targets", targets, "--out", out, *_ELASTIC], out, 3)
    try:
        if _at_step(out, 20):
            os.kill(procs[2].pid, signal.SIGKILL)
        codes = [p.wait(timeout=120) for p in procs]
    finally:
        for p in procs:
            p.kill()
    if not (out / "final.pt").is_file():
        return False, f"exit codes {codes}; no final.pt: {(out / 'err0.txt').read_text()[-300:]}"
    final = torch.load(out / "final.pt", weights_only=True)
    lost = final.get("learners_lost")
    ok = codes == [0, 0, -signal.SIGKILL] and [r["rank"] for r in lost or []] == [2]
    return ok, f"exit codes {codes}; world_size {final['world_size']}, learners_lost {lost}"


PROBES: list[Callable[[Path], tuple[bool, str]]] = [
    powersgd_ssgd, every_learner_lost, simulate_memory, nested_checkpoint_entry,
    loglikes_twice, loglikes_cut, lmrescore_other_graph, lmrescore_all_dropped,
    decode_disk_full, elastic_lost_learner,
]
