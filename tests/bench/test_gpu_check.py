"""`make gpu-check` in its CPU mode: the same code at tiny size, so the test run keeps it
working on machines without a GPU; and what keeps a short GPU lease's figures: each part
published as it ends, a failing part one line, the budget dropping the least important parts."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from bench import gpu_check

REPO = Path(__file__).resolve().parents[2]
TITLES = [part.title for part in gpu_check.PARTS]


# the learners part's strategies here: hierarchical (4 learners), a pairwise exchange with its
# compressed row, and the allreduce; tests/parallel runs every strategy as real processes
ALGOS = ["ssgd", "hadpsgd", "adpsgd-random"]


@pytest.mark.heavy(90)
@pytest.mark.timeout(660)  # its subprocess's own limit, 600 s: 7 min on a loaded 2-core box
def test_gpu_check_runs_every_part_at_tiny_size_without_console_scripts(tmp_path):
    out = tmp_path / "gpu_check.md"
    bin_dir = str(Path(sys.executable).parent)  # no asrdist-* script on PATH
    path = os.pathsep.join(p for p in os.environ["PATH"].split(os.pathsep) if p != bin_dir)
    proc = subprocess.run([sys.executable, "-m", "bench.gpu_check", "--tiny", "--publish", str(out),
                           "--budget", "1800",  # a loaded machine must not skip a part
                           "--algos", ",".join(ALGOS)],
                          cwd=REPO, env=dict(os.environ, PATH=path), capture_output=True,
                          text=True, timeout=600, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("gpu-check: ") and "torch " in lines[0]  # versions first
    assert lines[1].startswith("gpu-check: --tiny; running the same checks at tiny size")
    headings = [line for line in lines if line.startswith("### ")]
    assert [h.rsplit(" (", 1)[0] for h in headings] == [f"### {t}" for t in TITLES]
    assert any(line.startswith("`pytest -m cuda tests`: ") and "FAILED" not in line
               for line in lines)
    rows = {line.split("|")[1].strip(): line.split("|")[3].strip() for line in lines
            if line.startswith("| ") and line.count("|") == 6}
    learner_rows = {name for name in rows if name.split()[0] in gpu_check.registry.algo_names()}
    assert learner_rows == {*ALGOS, "adpsgd-random --compress int8"}, learner_rows
    for name in learner_rows:
        assert rows[name] == "0", name  # ran to its end as real processes
    assert any(line.startswith("| ssgd | 2 | together |") for line in lines)
    assert any(line.startswith("| fp32 | fp32 | float32 | no |") for line in lines)
    written = out.read_text()
    assert written.startswith("## GPU check\n") and "Finished in" in written
    assert all(f"### {t} (" in written for t in TITLES)


def _stub_parts(monkeypatch, out: Path, seconds: float = 0.0, fail: str | None = None,
                ) -> tuple[list[str], list[str]]:
    """Every part a stub that sleeps ``seconds`` and returns one row (``fail``'s raises); each
    notes what the output file held when it started. Returns (parts run, problems seen)."""
    ran: list[str] = []
    problems: list[str] = []
    for part in gpu_check.PARTS:
        def run(_check, title: str = part.title) -> list[str]:
            text = out.read_text() if out.exists() else ""
            for before in ran:  # every part ended so far is in the file already
                if before != fail and f"| row of {before} |" not in text:
                    problems.append(f"{title} started before {before}'s rows were written")
            if ran and f"{title}" not in text.split("Not run yet")[-1].split("\n")[0]:
                problems.append(f"{title} not listed as still to run")
            ran.append(title)
            time.sleep(seconds)
            if title == fail:
                raise RuntimeError("boom\nand a long traceback")
            return [f"| row of {title} |", ""]
        monkeypatch.setattr(gpu_check, part.function, run)
    return ran, problems


def test_each_part_is_published_as_it_ends_and_a_failing_part_leaves_the_others(
        tmp_path, monkeypatch):
    out = tmp_path / "gpu_check.md"
    out.write_text("## GPU check\n\nold figures\n")
    failing = TITLES[2]
    ran, problems = _stub_parts(monkeypatch, out, fail=failing)
    with pytest.raises(SystemExit, match=f"gpu-check: failed: {failing}"):
        gpu_check.main(["--tiny", "--publish", str(out)])
    assert ran == TITLES and problems == []
    text = out.read_text()
    assert "old figures" not in text and text.startswith("## GPU check\n")
    assert f"### {failing} (" in text and "FAILED: RuntimeError: boom\n" in text
    assert "and a long traceback" not in text
    for title in TITLES:
        if title != failing:
            assert f"| row of {title} |" in text
    assert f"Failed: {failing}." in text and "Not run yet" not in text


def test_the_budget_skips_the_parts_that_would_not_fit_least_important_first(
        tmp_path, monkeypatch):
    """Eight parts of 1 s but the fourth of 10 s, 5.5 s of budget: the first three run, the
    fourth cannot fit, the fifth and sixth still do, the seventh and eighth not."""
    costs = [1, 1, 1, 10, 1, 1, 1, 1]
    monkeypatch.setattr(gpu_check, "PARTS", [
        dataclasses.replace(p, gpu_s=c, tiny_s=c) for p, c in zip(gpu_check.PARTS, costs,
                                                                 strict=True)])
    out = tmp_path / "gpu_check.md"
    ran, problems = _stub_parts(monkeypatch, out, seconds=1.0)
    gpu_check.main(["--tiny", "--publish", str(out), "--budget", "5.5"])
    assert ran == [TITLES[i] for i in (0, 1, 2, 4, 5)] and problems == []
    text = out.read_text()
    for i in (3, 6, 7):
        assert f"### {TITLES[i]} (skipped)\n\nSkipped: estimated {costs[i]} s, " in text
        assert f"| row of {TITLES[i]} |" not in text
    assert f"Skipped: {TITLES[3]}, {TITLES[6]}, {TITLES[7]}." in text


@pytest.mark.parametrize("args, message", [
    (["--budget", "0"], "--budget 0: give a positive number of seconds"),
    (["--algos", "ssgd,adpsgd-rnd"], "--algos ssgd,adpsgd-rnd: no distributed strategy "
                                     "adpsgd-rnd"),
])
def test_a_bad_option_is_one_line(capsys, args, message):
    with pytest.raises(SystemExit) as exc:
        gpu_check.main(["--tiny", *args])
    assert exc.value.code == 2
    assert message in capsys.readouterr().err


def test_every_registered_strategy_runs_unless_algos_names_some(tmp_path):
    every = gpu_check.Check(gpu_check.TINY, torch.device("cpu"), tmp_path)
    assert every.algos == [a for a in gpu_check.registry.algo_names() if a != "single"]
    assert "hadpsgd" in every.algos and "diloco-async" in every.algos
    assert gpu_check.Check(gpu_check.TINY, torch.device("cpu"), tmp_path, ["ssgd"]).algos == \
        ["ssgd"]


def test_learners_get_the_pythonpath_extended(monkeypatch):
    """A bare host's wheels directory stays on the learners' path, after this asrdist."""
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(["/nodes/wheels", "/other"]))
    paths = gpu_check.learner_env(2)["PYTHONPATH"].split(os.pathsep)
    assert paths == [str(REPO), "/nodes/wheels", "/other"]
