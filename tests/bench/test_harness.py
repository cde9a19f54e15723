"""The learner launcher that benchmarks and tests share, and the benchmarks' strategy presets."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest
import torch
import torch.distributed as dist

from asrdist.parallel import registry
from asrdist.testing.learners import launch
from bench.harness import (
    REPO,
    commit_of,
    compared_trees,
    extract,
    fresh_process,
    generated_once,
    presets,
    run_training,
)


def _sum_of_ranks(rank: int, n: int, scale: int) -> tuple[int, int, float]:
    t = torch.tensor([float(rank)])
    dist.all_reduce(t)
    return rank, n, scale * t.item()


def _fails_on_rank_1(rank: int, n: int) -> int:
    if rank == 1:
        raise RuntimeError("learner 1 fails")
    return rank


def test_launch_returns_each_learners_result_by_rank() -> None:
    assert launch(_sum_of_ranks, 3, 10, timeout_s=60) == [(0, 3, 30.0), (1, 3, 30.0),
                                                          (2, 3, 30.0)]


def test_a_failing_learner_fails_the_launch_at_once() -> None:
    t0 = time.monotonic()
    with pytest.raises(RuntimeError, match=r"exit codes \[0, 1\], results from ranks \[0\]"):
        launch(_fails_on_rank_1, 2, timeout_s=60)
    assert time.monotonic() - t0 < 30


def test_presets_name_registered_strategies_and_the_node_size() -> None:
    names = registry.algo_names()
    for per_node in (2, 4):
        chosen = dict(presets(per_node))
        assert set(chosen) <= set(names)
        assert chosen["hadpsgd"] == {"learners_per_node": per_node, "hadpsgd_variant": "random"}


def test_a_fresh_process_runs_the_extracted_revisions_asrdist(tmp_path) -> None:
    tree = extract("HEAD", tmp_path / "old")
    assert (tree / "asrdist" / "__init__.py").is_file()
    code = ("import json, sys, asrdist; print('noise'); "
            "print(json.dumps([asrdist.__file__, sys.argv[1:]]))")
    where, args = fresh_process(code, 1, tmp_path, tree=tree)
    assert Path(where).is_relative_to(tree) and args == ["1", str(tmp_path)]
    assert fresh_process(code, tree=REPO)[0] == str(REPO / "asrdist" / "__init__.py")


def test_a_failing_fresh_process_is_its_stderr() -> None:
    with pytest.raises(SystemExit, match="ZeroDivisionError"):
        fresh_process("1 / 0")


def test_run_training_starts_afresh_on_one_thread(tmp_path) -> None:
    out = tmp_path / "run"
    (out / "old").mkdir(parents=True)
    code = ("import os, sys; assert not os.path.exists(sys.argv[1]); "
            "sys.stderr.write(os.environ['OMP_NUM_THREADS']); sys.exit(3)")
    proc, seconds = run_training([sys.executable, "-c", code, str(out)], out)
    assert (proc.returncode, proc.stderr) == (3, "1") and seconds > 0


def test_inputs_are_generated_once_and_a_cut_generation_is_redone(tmp_path) -> None:
    calls = []

    def make(root):
        calls.append(root)
        root.mkdir(parents=True)
        (root / "data").write_text("x")
        return 7

    root = tmp_path / "x1"
    assert generated_once(root, make) == 7 and generated_once(root, make) == 7
    assert len(calls) == 1
    (root / "frames").unlink()  # as a generation killed before its marker
    (root / "stale").write_text("left by the cut run")
    assert generated_once(root, make) == 7 and len(calls) == 2
    assert not (root / "stale").exists()


def test_compared_trees_name_this_tree_and_the_revision(tmp_path) -> None:
    assert list(compared_trees(None, tmp_path)) == [f"this tree ({commit_of('HEAD')})"]
    trees = compared_trees("HEAD~1", tmp_path / "work")
    name = f"HEAD~1 ({commit_of('HEAD~1')})"
    assert list(trees) == [name, f"this tree ({commit_of('HEAD')})"]
    assert (trees[name] / "asrdist" / "__init__.py").is_file()
    by_commit = compared_trees(commit_of("HEAD~1"), tmp_path / "work")
    assert list(by_commit)[0] == commit_of("HEAD~1")  # not "abc1234 (abc1234)"
