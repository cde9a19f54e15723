"""asrdist-simulate on the tiny learnable corpus, as a process."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

import asrdist
from asrdist.cli import simulate
from asrdist.models.final import load_final
from asrdist.parallel.registry import PLUGINS_ENV
from asrdist.simulate import guards
from asrdist.testing import make_corpus
from tests.cli_process import run_cli

try:
    from tensorboard.backend.event_processing import event_accumulator
except ImportError:
    event_accumulator = None


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return make_corpus(tmp_path_factory.mktemp("sim") / "corpus", num_utts=24)



def _not_json(name: str) -> None:
    """json.loads' hook for Infinity and NaN, which strict JSON readers refuse."""
    raise AssertionError(f"the report holds {name}, which is not JSON")

def test_simulated_learners_learn_and_report(corpus, tmp_path):
    data, targets = corpus
    out = tmp_path / "sim.json"
    res = run_cli("simulate", "--data", data, "--targets", targets, "--out", out,
                  "--algo", "hadpsgd", "--learners", "4", "-O", "learners_per_node=2",
                  "-O", "hadpsgd_variant=delay1", "--batch-size", "4", "--epochs", "2",
                  "--heldout-utts", "4", "--units", "16", "--lr", "0.2", "--jitter", "0.3",
                  "--latency", "0.2", "--chunk-len", "5", "--layers", "1", "--grad-clip", "5",
                  "--lr-scaling", "none",  # a constant lr: no annealing in 2 epochs
                  "--export", tmp_path / "final.pt", "--tensorboard", tmp_path / "tb")
    assert res.returncode == 0, res.stderr
    _, exported = load_final(tmp_path / "final.pt")  # as asrdist-decode --model loads it
    assert (exported.algo, exported.world_size, exported.chunk_len) == ("hadpsgd", 4, 5)
    report = json.loads(out.read_text(), parse_constant=_not_json)
    assert report["speed"]["bandwidth"] is None and report["speed"]["node_bandwidth"] is None
    records = report["records"]
    assert len(records) >= 4 and records[-1]["epochs"] == pytest.approx(2.0)
    assert records[-1]["heldout_ce"] < records[0]["heldout_ce"]
    assert (records[0]["steps"], records[0]["time_s"]) == (0, 0.0)  # the start
    assert all(r["time_s"] > 0 for r in records[1:])
    assert [r.get("final", False) for r in records] == [False] * (len(records) - 1) + [True]
    assert len(report["summary"]["wait_s"]) == 4
    assert report["summary"]["staleness"]
    assert "ce=" in res.stdout and res.stdout.strip().splitlines()[-1].endswith(" final")
    if event_accumulator is not None:  # the tensorboard extra
        events = event_accumulator.EventAccumulator(str(tmp_path / "tb"))
        events.Reload()
        assert [(e.step, e.wall_time, e.value) for e in events.Scalars("heldout/heldout_ce")] \
            == [(round(r["steps"]), r["time_s"], pytest.approx(r["heldout_ce"], rel=1e-6))
                for r in records]


def test_the_report_describes_its_run(corpus, tmp_path):
    """Default bmuf: its options as the strategy took them (eta -1 resolved to 1 - 1/N in
    what it reports), the speed model with its straggler, the data, the model and the steps;
    the guards' lines on stderr."""
    data, targets = corpus
    out = tmp_path / "bmuf.json"
    res = run_cli("simulate", "--data", data, "--targets", targets, "--out", out,
                  "--algo", "bmuf", "--learners", "4", "--batch-size", "4", "--chunk-len", "5",
                  "--heldout-utts", "4", "--layers", "1", "--units", "8", "--epochs", "1",
                  "--evals", "2", "--slow-learner", "2:3", "--latency", "0.01",
                  "--bandwidth", "1e6")
    assert res.returncode == 0, res.stderr
    report = json.loads(out.read_text())
    assert report["version"] == asrdist.__version__
    assert report["spec"]["options"] == {
        "compress": "none", "compress_rank": 1, "error_feedback": True,
        "avg_period": 8, "avg_frames": 0, "batch_size": 4, "chunk_len": 5,
        "bmuf_momentum": -1.0, "bmuf_lr": 1.0, "bmuf_nesterov": True}
    assert report["summary"]["strategy"]["block_momentum"] == 0.75
    assert report["summary"]["strategy"]["avg_period"] == 8
    speed = report["speed"]
    assert speed["slow"] == [{"learner": 2, "factor": 3.0}]
    assert (speed["latency_s"], speed["bandwidth"], speed["compute_s"]) == (0.01, 1e6, 1.0)
    assert report["cost"]["allreduce_s"] > report["cost"]["message_s"] > 0.01
    described = report["data"]
    assert (described["data"], described["targets"]) == (str(data), str(targets))
    assert described["utterances"] == {"train": 20, "heldout": 4}
    assert described["frames"]["train"] > described["chunks"]["train"] > 0
    assert report["model"]["weights"] > 0
    assert report["model"]["bytes"] == 4 * report["model"]["weights"]
    per_epoch = described["chunks"]["train"] // 16
    assert report["steps"] == {"per_epoch": per_epoch, "total": per_epoch}
    assert per_epoch < 20 and report["warnings"][0].startswith(
        f"an epoch is only {per_epoch} steps of 4 learners x 4 chunks")
    assert report["warnings"][0] in res.stderr
    assert report["failed"] is None and report["host_s"] == report["summary"]["host_s"] > 0
    assert "speed model: a step computes 1 s + 0 s update; learner 2 3x slower; the model's" \
        in res.stderr


def test_asrdist_plot_draws_a_simulator_report(corpus, tmp_path):
    data, targets = corpus
    out = tmp_path / "ssgd.json"
    res = run_cli("simulate", "--data", data, "--targets", targets, "--out", out,
                  "--learners", "2", "--batch-size", "4", "--chunk-len", "5",
                  "--heldout-utts", "4", "--layers", "1", "--units", "8", "--epochs", "0.5",
                  "--evals", "2")
    assert res.returncode == 0, res.stderr
    png = tmp_path / "curves.png"
    plotted = run_cli("plot", out, "--out", png)
    assert plotted.returncode == 0, plotted.stderr
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_plugin_strategy_is_simulated_as_it_is_trained(corpus, tmp_path, monkeypatch):
    """test_toy_strategy's strategy, loaded as asrdist-train loads it (ASRDIST_STRATEGIES),
    with its own option: nothing of it is in the simulator."""
    data, targets = corpus
    out = tmp_path / "sim.json"
    monkeypatch.setenv(PLUGINS_ENV, "tests.parallel.test_toy_strategy")
    res = run_cli("simulate", "--data", data, "--targets", targets, "--out", out,
                  "--algo", "toy-average", "--learners", "3", "-O", "toy_every=2",
                  "--batch-size", "4", "--epochs", "2", "--heldout-utts", "4", "--units", "16",
                  "--lr", "0.2", "--latency", "0.2", "--chunk-len", "5", "--layers", "1",
                  "--grad-clip", "5", "--lr-scaling", "none")
    assert res.returncode == 0, res.stderr
    records = json.loads(out.read_text())["records"]
    assert records[-1]["heldout_ce"] < records[0]["heldout_ce"]
    assert records[0]["dist_to_mean"] > 0  # the learners drift apart between averages
    assert records[-1]["dist_to_mean"] == pytest.approx(0.0, abs=1e-6)  # the exported mean


def test_noise_scale_records(corpus, tmp_path):
    data, targets = corpus
    out = tmp_path / "sim.json"
    res = run_cli("simulate", "--data", data, "--targets", targets, "--out", out,
                  "--algo", "ssgd", "--learners", "2", "--batch-size", "4", "--epochs", "1",
                  "--heldout-utts", "4", "--units", "8", "--layers", "1", "--chunk-len", "5",
                  "--noise-scale-every", "2")
    assert res.returncode == 0, res.stderr
    noise = json.loads(out.read_text())["noise_scale"]
    assert len(noise) >= 2 and noise[0]["steps"] == 0 and noise[1]["steps"] == 2
    assert all((r["b_small"], r["b_big"]) == (4, 8) and "epochs" in r for r in noise)


def test_bad_strategy_option_is_one_line(corpus, tmp_path):
    data, targets = corpus
    res = run_cli("simulate", "--data", data, "--targets", targets, "--out", tmp_path / "x",
                  "--algo", "ma", "-O", "avg_period=often")
    assert res.returncode == 2
    assert "-O avg_period=often: avg_period: 'often' is not a valid int" in res.stderr
    assert not (tmp_path / "x").exists()


def test_a_slow_learner_that_does_not_exist_is_refused(corpus, tmp_path):
    data, targets = corpus
    res = run_cli("simulate", "--data", data, "--targets", targets, "--out", tmp_path / "x",
                  "--learners", "4", "--batch-size", "1", "--chunk-len", "5",
                  "--slow-learner", "7:2")
    assert res.returncode != 0
    assert "there is no learner 7 among 4 (ranks 0..3)" in res.stderr
    assert not (tmp_path / "x").exists()


@pytest.mark.parametrize("args, message", [
    (("--algo", "adpsgd-typo"), "unknown --algo 'adpsgd-typo'"),
    (("--algo", "ma", "-O", "avg_every=8"), "'avg_every=8': expected NAME=VALUE, NAME one of"),
    (("--algo", "ma", "-O", "avg_period"), "'avg_period': expected NAME=VALUE"),
    (("--algo", "adpsgd-fixed", "-O", "slow_learner=1:4"), "a slow learner is --slow-learner"),
    (("--algo", "ma", "-O", "seed=3"), "'seed=3': expected NAME=VALUE"),
])
def test_an_unknown_algo_or_option_name_is_one_line(corpus, tmp_path, args, message):
    """In process (test_bad_strategy_option_is_one_line runs the command as its own process)."""
    data, targets = corpus
    res = CliRunner().invoke(simulate.main, ["--data", str(data), "--targets", str(targets),
                                             "--out", str(tmp_path / "x"), *args])
    assert res.exit_code == 2
    last = res.stderr.strip().splitlines()[-1]
    assert last.startswith("Error: ") and message in last and "Traceback" not in res.output
    assert not (tmp_path / "x").exists()


def test_strategy_flags_reach_the_strategy_and_others_are_ignored(corpus, tmp_path):
    data, targets = corpus
    small = ("--learners", "2", "--batch-size", "4", "--chunk-len", "5", "--heldout-utts", "4",
             "--layers", "1", "--units", "8", "--epochs", "0.5", "--evals", "1")
    out = tmp_path / "ma.json"
    res = run_cli("simulate", "--data", data, "--targets", targets, "--out", out,
                  "--algo", "ma", "--avg-period", "3", "--hadpsgd-variant", "random", *small)
    assert res.returncode == 0, res.stderr
    spec = json.loads(out.read_text())["spec"]
    assert spec["options"] == {"compress": "none", "compress_rank": 1, "error_feedback": True,
                               "avg_period": 3, "avg_frames": 0, "batch_size": 4,
                               "chunk_len": 5, "post_local_after": 0}
    assert spec["schedule"]["lr_schedule"] == "ibm" and spec["model"]["layers"] == 1
    assert "--algo ma does not use --hadpsgd-variant: ignored" in res.stderr


@pytest.mark.parametrize(("flags", "message"), [
    (("--layers", "0"), "--layers must be positive, got 0"),
    (("--lr", "-1"), "--lr must be positive, got -1.0"),
    (("--jitter", "-0.5"), "--jitter must not be negative, got -0.5"),
    (("--algo", "ma", "--avg-period", "0"), "--avg-period must be positive, got 0"),
])
def test_a_bad_value_is_refused_as_asrdist_train_refuses_it(corpus, tmp_path, flags, message):
    data, targets = corpus
    res = run_cli("simulate", "--data", data, "--targets", targets, "--out", tmp_path / "x",
                  *flags)
    assert res.returncode == 1
    assert res.stderr.strip().splitlines()[-1] == f"Error: {message}"
    assert not (tmp_path / "x").exists()


@pytest.mark.parametrize("flag", ["--export", "--out"])
def test_an_output_in_a_missing_directory_is_refused_before_the_run(corpus, tmp_path, flag):
    data, targets = corpus
    outputs = {"--out": tmp_path / "sim.json", "--export": tmp_path / "final.pt",
               flag: tmp_path / "missing" / "x"}
    res = run_cli("simulate", "--data", data, "--targets", targets, "--learners", "2",
                  "--batch-size", "2", "--chunk-len", "5", "--epochs", "0.1",
                  "--out", outputs["--out"], "--export", outputs["--export"])
    assert res.returncode == 2
    assert f"Invalid value for {flag}: {tmp_path / 'missing' / 'x'}: no directory " \
        f"{tmp_path / 'missing'}" in res.stderr
    assert "held-out" not in res.stdout + res.stderr  # refused before the corpus loads
    assert not any(p.exists() for p in outputs.values())


def test_an_output_in_an_unwritable_directory_is_refused_before_the_run(corpus, tmp_path,
                                                                        monkeypatch):
    """In process: as root (CI) no directory is unwritable, so os.access is told to say so."""
    data, targets = corpus
    locked = tmp_path / "locked"
    locked.mkdir()
    monkeypatch.setattr(simulate.os, "access", lambda path, mode: Path(path) != locked)
    res = CliRunner().invoke(simulate.main, ["--data", str(data), "--targets", str(targets),
                                             "--out", str(tmp_path / "sim.json"),
                                             "--export", str(locked / "final.pt")])
    assert res.exit_code == 2
    assert f"Invalid value for --export: {locked / 'final.pt'}: directory {locked} is not " \
        "writable" in res.output
    assert not (tmp_path / "sim.json").exists()


def test_learners_that_cannot_fit_in_memory_are_refused_with_the_estimate(corpus, tmp_path,
                                                                          monkeypatch):
    """1000 learners of the default model (21 M weights) on a 23 GB host: one line before any
    learner is made (it started allocating 85 GB), whatever this host really has."""
    monkeypatch.setattr(guards, "available_memory", lambda: 23 * 10**9)
    data, targets = corpus
    out = tmp_path / "sim.json"
    res = CliRunner().invoke(simulate.main, ["--data", str(data), "--targets", str(targets),
                                             "--out", str(out), "--learners", "1000"])
    assert res.exit_code == 1
    assert res.output.strip().splitlines()[-1] == (
        "Error: --learners 1000: the learners need at least 421.3 GB (21062661 weights, 84.3 MB, "
        "x 5 copies per learner x 1000) and this host has 23.0 GB available: use fewer "
        "--learners or a smaller model")
    assert not out.exists()


def test_learners_that_fit_are_not_refused(corpus, tmp_path, monkeypatch):
    monkeypatch.setattr(guards, "available_memory", lambda: 10**8)
    data, targets = corpus
    res = CliRunner().invoke(simulate.main, [
        "--data", str(data), "--targets", str(targets), "--out", str(tmp_path / "sim.json"),
        "--learners", "2", "--batch-size", "4", "--chunk-len", "5", "--heldout-utts", "4",
        "--layers", "1", "--units", "8", "--epochs", "0.5"])
    assert res.exit_code == 0, res.output


def test_a_conformer_is_simulated_and_a_model_with_fixed_context_is_refused(corpus, tmp_path):
    """--model conformer trains and exports a Conformer (its learners computed together is
    tests/simulate/test_stacked.py's); the DNN and TDNN-F, whose weights need context frames
    the chunk pool does not hold, are one line."""
    data, targets = corpus
    common = ["--data", str(data), "--targets", str(targets), "--algo", "adpsgd-random",
              "--learners", "4", "--batch-size", "4", "--epochs", "1", "--heldout-utts", "4",
              "--chunk-len", "5", "--lr", "0.2"]
    res = CliRunner().invoke(simulate.main, [
        *common, "--out", str(tmp_path / "sim.json"), "--model", "conformer",
        "--conformer-blocks", "1", "--attention-dim", "8", "--attention-heads", "2",
        "--conv-kernel", "3", "--export", str(tmp_path / "final.pt")])
    assert res.exit_code == 0, res.output
    report = json.loads((tmp_path / "sim.json").read_text())
    assert report["spec"]["model"]["type"] == "conformer"
    model, _ = load_final(tmp_path / "final.pt")
    assert type(model).__name__ == "Conformer"
    refused = CliRunner().invoke(simulate.main, [*common, "--out", str(tmp_path / "t.json"),
                                                 "--model", "tdnnf"])
    assert refused.exit_code == 2 and "'tdnnf': the simulator runs blstm or conformer" in \
        refused.output and not (tmp_path / "t.json").exists()
