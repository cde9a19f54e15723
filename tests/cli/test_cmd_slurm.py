"""--cmd slurm.pl on a real (private, one-node) Slurm cluster: asrdist-decode's,
asrdist-features' and asrdist-compute-loglikes' --nj jobs go through sbatch as a job array with
the options asked for, write Kaldi's log/<task>.N.log (compute-loglikes: .log/, hidden), and
give what run.pl gives; a job that fails is named with its log."""

from __future__ import annotations

import re
import subprocess
import sys
import time
from pathlib import Path

import kaldiio
import numpy as np
import pytest

from asrdist.decode.graph import make_graph
from asrdist.testing.tiny_system import make_system, write_identity_nnet, write_test_data
from tests import slurm_cluster
from tests.cli.test_decode_cli import SENTENCES
from tests.cli.test_features_cli import cli_feat_src  # noqa: F401 - a fixture used below

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    yield from slurm_cluster.for_module(tmp_path_factory)


@pytest.fixture(scope="module")
def system(tmp_path_factory):
    made = make_system(tmp_path_factory.mktemp("cmd_slurm") / "sys")
    make_graph(made.lang, made.mono / "final.mdl", made.train_text, made.root / "graph")
    return made


def _cli(cluster, module: str, *args: str) -> subprocess.CompletedProcess:
    """``asrdist.cli.<module>`` as a process that sees the test cluster (SLURM_CONF)."""
    return subprocess.run([sys.executable, "-m", f"asrdist.cli.{module}", *args],
                          capture_output=True, text=True, timeout=240, env=cluster.env)


def _decode(cluster, system, data: Path, out: Path, *cmd: str) -> subprocess.CompletedProcess:
    return _cli(cluster, "decode", "--graph", str(system.root / "graph"), "--gmm",
                str(system.mono / "final.mdl"), "--data", str(data), "--nj", "2",
                "--lmwt", "5 10", "--wip", "0.0 1.0", "--out", str(out), *cmd)


def _ended(cluster, job: str) -> dict[str, str]:
    """scontrol's fields of ``job`` once it has ended (it may still be exiting when the stage,
    which has its result, returns)."""
    deadline = time.monotonic() + 30
    while True:
        out = cluster.run("scontrol", "show", "job", job)
        fields = dict(f.split("=", 1) for f in out.split() if "=" in f)
        if fields["JobState"] not in ("RUNNING", "COMPLETING") or time.monotonic() > deadline:
            return fields
        time.sleep(0.2)


def test_decode_jobs_go_through_sbatch_and_give_run_pl_s_output(cluster, system, tmp_path):
    data = tmp_path / "data"
    write_test_data(system, data, SENTENCES, "gmm")
    local = _decode(cluster, system, data, tmp_path / "local")
    assert local.returncode == 0, local.stderr
    slurm = _decode(cluster, system, data, tmp_path / "slurm",
                    "--cmd", "slurm.pl --mem 500M --time 5:00 --max-jobs-run 1")
    assert slurm.returncode == 0, slurm.stderr
    outputs = sorted(p.relative_to(tmp_path / "local") for p in (tmp_path / "local").rglob("*")
                     if p.is_file() and p.parent.name != "log")
    assert len(outputs) == 15  # lat.{1,2}.gz, num_jobs, words.txt, text, ctm, the sweep's
    # 4 x (text, ctm), .decode.done
    for name in outputs:
        if name.name != ".decode.done":  # it names the options and inputs, --cmd left out
            assert (tmp_path / "slurm" / name).read_bytes() == \
                (tmp_path / "local" / name).read_bytes(), name
    assert not list((tmp_path / "local" / "log").glob("decode.*.log"))  # run.pl as before

    log = tmp_path / "slurm" / "log"
    texts = [(log / f"decode.{n}.log").read_text() for n in (1, 2)]
    ids = [re.search(r"^# Slurm job (\d+)_(\d+) on ", text, re.M) for text in texts]
    assert all(ids) and [m.group(2) for m in ids] == ["1", "2"], texts
    assert all("# Ended (code 0) at " in text for text in texts), texts
    first, second = (_ended(cluster, m.group(0).split()[3]) for m in ids)
    for job in (first, second):  # the options asked for, each job in the one array
        assert (job["JobName"], job["JobState"], job["TimeLimit"], job["MinMemoryNode"],
                job["ArrayTaskThrottle"]) == ("decode", "COMPLETED", "00:05:00", "500M", "1")
    assert second["StartTime"] >= first["EndTime"]  # --max-jobs-run 1: one after the other
    assert sorted(p.name for p in (log / "q").iterdir()) == ["decode.sh"]  # inputs cleaned up


def test_a_failed_decode_job_is_named_with_its_log_and_nothing_looks_done(
        cluster, system, tmp_path):
    data = tmp_path / "data"
    write_test_data(system, data, SENTENCES, "gmm")
    scp = (data / "feats.scp").read_text().splitlines()  # job 2 of 2 decodes v1-u2 (dealt)
    offset = scp[1].rsplit(":", 1)[1]
    scp[1] = f"v1-u2 {tmp_path / 'gone.ark'}:{offset}"
    (data / "feats.scp").write_text("\n".join(scp) + "\n")
    out = tmp_path / "dec"
    proc = _decode(cluster, system, data, out, "--cmd", "slurm.pl --time 5:00")
    assert proc.returncode == 1
    lines = proc.stderr.strip().splitlines()
    error = next(i for i, line in enumerate(lines) if line.startswith("Error: "))
    assert re.fullmatch(rf"Error: decode job 2/2: FileNotFoundError: .*{tmp_path / 'gone.ark'}"
                        rf".* \(log: {out / 'log' / 'decode.2.log'}\)", lines[error]), lines
    tail = lines[error + 1:]  # the log's last lines, indented
    assert 1 <= len(tail) <= 5 and all(line.startswith("  ") for line in tail), lines
    assert any("gone.ark" in line for line in tail), tail
    assert "Traceback" in (out / "log" / "decode.2.log").read_text()
    assert not (out / "text").exists() and not (out / ".decode.done").exists()
    assert (out / "log" / "q" / "decode.2.in").is_file()  # kept: the job can be rerun by hand


def test_feature_jobs_through_sbatch_equal_run_pl_s(cluster, cli_feat_src, tmp_path):  # noqa: F811
    local = _cli(cluster, "features", "--nj", "2", str(cli_feat_src), str(tmp_path / "local"))
    assert local.returncode == 0, local.stderr
    slurm = _cli(cluster, "features", "--nj", "2", "--cmd", "slurm.pl --mem 500M",
                 str(cli_feat_src), str(tmp_path / "slurm"))
    assert slurm.returncode == 0, slurm.stderr
    for table in ("feats.scp", "cmvn.scp"):
        ours = dict(kaldiio.load_scp(str(tmp_path / "slurm" / table)))
        theirs = dict(kaldiio.load_scp(str(tmp_path / "local" / table)))
        assert ours.keys() == theirs.keys()
        assert all(np.array_equal(ours[k], theirs[k]) for k in ours), table
    for n in (1, 2):
        assert "# Ended (code 0) at " in (tmp_path / "slurm" / "log" / f"fbank.{n}.log").read_text()


def test_loglikes_jobs_through_sbatch_equal_run_pl_s_and_leave_decode_done(
        cluster, system, tmp_path):
    """The network's scores from two Slurm jobs are run.pl's, byte for byte; the jobs log to
    OUT/.log, which decode's fingerprint of OUT skips; a rerun submits nothing and writes
    nothing, so the decode from those scores stays done."""
    data = tmp_path / "data"
    write_test_data(system, data, SENTENCES, "nnet")
    write_identity_nnet(system, tmp_path / "final.pt")
    args = ("--model", str(tmp_path / "final.pt"), "--data", str(data), "--nj", "2")
    local = _cli(cluster, "compute_loglikes", *args, "--out", str(tmp_path / "local"))
    assert local.returncode == 0, local.stderr
    slurm_args = (*args, "--cmd", "slurm.pl --mem 500M --time 5:00", "--out",
                  str(tmp_path / "slurm"))
    slurm = _cli(cluster, "compute_loglikes", *slurm_args)
    assert slurm.returncode == 0, slurm.stderr
    ours, theirs = tmp_path / "slurm", tmp_path / "local"
    for name in ("loglikes.ark", "num_pdfs"):
        assert (ours / name).read_bytes() == (theirs / name).read_bytes(), name
    assert (ours / "loglikes.scp").read_text() == (theirs / "loglikes.scp").read_text().replace(
        str(theirs.resolve()), str(ours.resolve()))
    for n in (1, 2):
        assert "# Ended (code 0) at " in (ours / ".log" / f"loglikes.{n}.log").read_text()
    assert sorted(p.name for p in ours.iterdir()) == [
        ".log", ".loglikes.done", "loglikes.ark", "loglikes.scp", "num_pdfs"]

    decode = ("--graph", str(system.root / "graph"), "--loglikes", str(ours / "loglikes.scp"),
              "--trans-mdl", str(system.mono / "final.mdl"), "--data", str(data), "--out",
              str(tmp_path / "dec"))
    assert _cli(cluster, "decode", *decode).returncode == 0
    before = {p: (p.stat().st_size, p.stat().st_mtime_ns) for p in ours.rglob("*")}
    again = _cli(cluster, "compute_loglikes", *slurm_args)
    assert again.returncode == 0 and "already done" in again.stderr, again.stderr
    assert {p: (p.stat().st_size, p.stat().st_mtime_ns) for p in ours.rglob("*")} == before
    redecode = _cli(cluster, "decode", *decode)
    assert redecode.returncode == 0 and "decode already done" in redecode.stderr, \
        redecode.stderr
