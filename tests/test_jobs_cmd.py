"""--cmd as cmd.sh writes it: parsing and its one-line errors, sbatch's options, a job run by
asrdist.cli.jobs_worker by hand, and a Slurm job that ends without a result (squeue faked; the real
cluster's tests are tests/cli/test_cmd_slurm.py)."""

from __future__ import annotations

import importlib
import pickle
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from asrdist.errors import AsrdistError
from asrdist.jobs import LOCAL, _Call
from asrdist.jobs import slurm as jobs_slurm
from asrdist.jobs.cmd import Cmd, parse_cmd
from asrdist.jobs.slurm import SlurmRunner
from asrdist.progress import Progress


def test_run_pl_is_the_local_runner_and_takes_slurm_pl_resources_as_kaldi_s_does() -> None:
    assert parse_cmd("run.pl") == Cmd()
    assert parse_cmd("utils/run.pl --mem 4G --time 1:00:00 --gpu 1 --num-threads 2") == \
        Cmd("run.pl", mem="4G", time="1:00:00", num_threads=2, gpu=1)
    assert parse_cmd("run.pl --mem 4G").make("log") is LOCAL


def test_slurm_pl_options_in_both_spellings_become_sbatch_options(tmp_path) -> None:
    cmd = parse_cmd("slurm.pl --mem 4G --time=1-02:00:00 --gpu 1 --num-threads 2 "
                    "--max-jobs-run=3 --partition gpu")
    assert cmd == Cmd("slurm.pl", mem="4G", time="1-02:00:00", num_threads=2, gpu=1,
                      partition="gpu", max_jobs_run=3)
    runner = cmd.make(tmp_path / "log")
    assert isinstance(runner, SlurmRunner)
    options = runner.sbatch_options("decode", 250)
    assert "--array=1-250%3" in options and f"--output={tmp_path}/log/decode.%a.log" in options
    for option in ("--mem=4G", "--time=1-02:00:00", "--gres=gpu:1", "--cpus-per-task=2",
                   "--partition=gpu", "--job-name=decode"):
        assert option in options, (option, options)
    plain = parse_cmd("slurm.pl").make(tmp_path).sbatch_options("fbank", 2)
    assert "--array=1-2" in plain and not any(o.startswith(("--mem", "--time", "--gres"))
                                              for o in plain)


@pytest.mark.parametrize("text, message", [
    ("", "empty: give run.pl or slurm.pl [options]"),
    ("queue.pl --mem 2G", "queue.pl (Grid Engine) is not implemented: use slurm.pl or run.pl"),
    ("sge.pl", "unknown runner 'sge.pl': use run.pl or slurm.pl"),
    ("slurm.pl --mem-per-cpu 2G", "slurm.pl: unknown option '--mem-per-cpu' (it takes --mem, "
                                  "--time, --num-threads, --gpu, --partition, --max-jobs-run)"),
    ("slurm.pl --time", "slurm.pl --time: needs a value"),
    ("slurm.pl --mem 4GB", "--mem 4GB: not a Slurm value (e.g. --mem 4G)"),
    ("slurm.pl --time soon", "--time soon: not a Slurm value (e.g. --time 1:00:00)"),
    ("slurm.pl --max-jobs-run 0", "--max-jobs-run 0: give a whole number >= 1"),
    ("slurm.pl --gpu -1", "--gpu -1: give a whole number >= 0"),
    ("run.pl --max-jobs-run 4", "run.pl --max-jobs-run: not supported here (run.pl starts "
                                "every --nj job at once): lower --nj, or use slurm.pl"),
    ("slurm.pl --partition 'gpu", '"slurm.pl --partition \'gpu": No closing quotation'),
])
def test_a_bad_cmd_is_one_line_naming_what_is_wrong(text, message) -> None:
    with pytest.raises(AsrdistError) as e:
        parse_cmd(text)
    assert e.value.message == message


@pytest.mark.parametrize("stage, args", [
    ("decode", ["--graph", "g", "--gmm", "m", "--data", "d", "--out", "o"]),
    ("features", ["src", "dest"]),
])
def test_the_stages_refuse_a_bad_cmd_before_any_work(stage, args) -> None:
    # imported here: asrdist.cli.jobs_worker imports this module for _square, and should not wait
    # for torch
    main = importlib.import_module(f"asrdist.cli.{stage}").main
    result = CliRunner().invoke(main, [*args, "--cmd", "slurm.pl --mem"])
    assert result.exit_code == 2
    assert result.output.strip().splitlines()[-1] == \
        "Error: Invalid value for '--cmd': slurm.pl --mem: needs a value"


def _square(x: int) -> int:
    if x < 0:
        raise AsrdistError(f"{x}: negative")
    return x * x


def _count(n: int):
    yield from range(n)


def _worker(base: Path, fn, *args) -> tuple[int, tuple, str]:
    base.with_name(base.name + ".in").write_bytes(pickle.dumps((_Call, (fn,), "run", args)))
    proc = subprocess.run([sys.executable, "-m", "asrdist.cli.jobs_worker", str(base.parent / "t"),
                           base.name.rsplit(".", 1)[1]], capture_output=True, text=True,
                          timeout=120)
    return proc.returncode, pickle.loads(base.with_name(base.name + ".out").read_bytes()), \
        proc.stdout + proc.stderr


def test_a_job_run_by_hand_leaves_its_result_ticks_and_kaldi_log_lines(tmp_path) -> None:
    code, result, log = _worker(tmp_path / "t.1", _square, 7)
    assert (code, result) == (0, ("ok", 49))
    assert log.startswith(f"# {sys.executable} -m asrdist.cli.jobs_worker {tmp_path}/t.1\n")
    assert "# Ended (code 0) at " in log
    code, result, _ = _worker(tmp_path / "t.2", _count, 3)
    assert (code, result) == (0, ("ok", [0, 1, 2]))
    assert (tmp_path / "t.2.ticks").read_bytes() == b"..."
    code, result, log = _worker(tmp_path / "t.3", _square, -2)
    assert code == 1 and result[0] == "error" and result[1][0].message == "-2: negative"
    assert "Traceback" in log and "# Ended (code 1) at " in log


def test_a_slurm_job_gone_without_a_result_is_named_and_the_others_cancelled(
        tmp_path, monkeypatch) -> None:
    """squeue says job 2 FAILED (killed for memory) and job 1 runs on: job 2 is named with its
    log's last lines, and the array is cancelled."""
    calls = []

    def fake_slurm(*command: str) -> str:
        calls.append(command[0])
        return {"sbatch": "77;cluster\n", "squeue": "1 RUNNING\n2 OUT_OF_MEMORY\n",
                "scancel": ""}[command[0]]

    monkeypatch.setattr(jobs_slurm, "_slurm", fake_slurm)
    monkeypatch.setattr(jobs_slurm, "GRACE_S", 0.0)
    monkeypatch.setattr(jobs_slurm, "POLL_S", 0.05)
    monkeypatch.setattr(jobs_slurm, "SQUEUE_EVERY_S", 0.0)
    (tmp_path / "log").mkdir()
    (tmp_path / "log" / "decode.2.log").write_text(
        "".join(f"line {i}\n" for i in range(9)) + "slurmstepd: error: Detected 1 oom_kill\n")
    runner = parse_cmd("slurm.pl --mem 1G").make(tmp_path / "log")
    with pytest.raises(AsrdistError) as e, runner.start("decode", _Call, [(_square,)] * 2) as jobs:
        jobs.call_each("run", [(1,), (2,)], Progress(2, "decode", "utt"))
    assert e.value.message.splitlines() == [
        f"decode job 2/2: Slurm job 77_2 ended (OUT_OF_MEMORY) without a result (killed for "
        f"memory or time?) (log: {tmp_path / 'log' / 'decode.2.log'})",
        "  line 5", "  line 6", "  line 7", "  line 8", "  slurmstepd: error: Detected 1 oom_kill"]
    assert calls[0] == "sbatch" and calls[-1] == "scancel"
    assert (tmp_path / "log" / "q" / "decode.2.in").is_file()  # kept: rerun it by hand
