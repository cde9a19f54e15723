"""The job runner: Kaldi's split, results in job order, the first error wins, no hang."""

from __future__ import annotations

import multiprocessing as mp
import os
import random
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from asrdist.errors import AsrdistError
from asrdist.jobs import LOCAL, deal, split, split_groups
from asrdist.progress import Progress


def _square_after(x: int, delay_s: float) -> int:
    time.sleep(delay_s)
    return x * x


def _fails_or_sleeps(fail: str) -> None:
    if fail == "asrdist":
        raise AsrdistError("utterance u7: bad input")
    if fail == "value":
        raise ValueError("a bug")
    if fail == "exit":
        os._exit(3)
    time.sleep(120)


def _count(n: int) -> Iterator[int]:
    yield from range(n)


class _Tally:
    """A job with state kept between calls."""

    def __init__(self, start: int) -> None:
        if start < 0:
            raise AsrdistError(f"negative start {start}")
        self.total = start

    def add(self, n: int) -> int:
        self.total += n
        return self.total


def test_deal_spreads_every_stretch_of_the_order_over_the_jobs() -> None:
    assert deal(list("abcdefg"), 3) == [["a", "d", "g"], ["b", "e"], ["c", "f"]]
    assert deal(["a"], 4) == [["a"]] and deal([], 2) == []
    slow = ["slow"] * 6 + ["fast"] * 6  # sorted by speaker: the slow voice first
    assert all(part.count("slow") == 3 for part in deal(slow, 2))


def test_split_is_contiguous_ordered_and_even_as_split_scp() -> None:
    assert split(list(range(10)), 3) == [[0, 1, 2, 3], [4, 5, 6], [7, 8, 9]]
    assert split(list("abc"), 5) == [["a"], ["b"], ["c"]]
    assert split([], 4) == []
    for n in range(1, 60):
        for nj in range(1, 12):
            parts = split(list(range(n)), nj)
            assert [x for p in parts for x in p] == list(range(n))
            sizes = [len(p) for p in parts]
            assert len(parts) == min(n, nj) and min(sizes) >= 1 and max(sizes) - min(sizes) <= 1
            assert sizes == sorted(sizes, reverse=True)  # the longer parts first
    with pytest.raises(ValueError):
        split([1], 0)


def test_split_groups_keeps_each_group_whole_and_shares_near_even() -> None:
    # 10 items in 2: the first part ends after "c" (5 items; "d"'s middle, 6.5, is past 5)
    groups = [["a"] * 3, ["b"], ["c"], ["d"] * 3, ["e"] * 2]
    assert split_groups(groups, 2) == [["a", "a", "a", "b", "c"], ["d", "d", "d", "e", "e"]]
    # fewer groups than jobs: one part each; a big group does not starve the others of a part
    assert split_groups([[1], [2]], 5) == [[1], [2]]
    assert split_groups([[1] * 10, [2], [3]], 3) == [[1] * 10, [2], [3]]
    assert split_groups([], 3) == []
    rng = random.Random(0)
    for _ in range(200):
        sizes = [rng.randint(1, 9) for _ in range(rng.randint(1, 15))]
        groups = [[(g, i) for i in range(size)] for g, size in enumerate(sizes)]
        nj = rng.randint(1, 8)
        parts = split_groups(groups, nj)
        assert len(parts) == min(nj, len(groups)) and all(parts)
        assert [x for p in parts for x in p] == [x for g in groups for x in g]
        for g in range(len(groups)):  # in one part
            assert sum(any(x[0] == g for x in p) for p in parts) == 1
    with pytest.raises(ValueError):
        split_groups([[1]], 0)


def test_results_come_back_in_job_order() -> None:
    args = [(3, 1.0), (2, 0.0), (5, 0.2)]  # the first job finishes last
    assert LOCAL.map("square", _square_after, args) == [9, 4, 25]
    assert LOCAL.map("square", _square_after, args[:1]) == [9]  # one job: in this process


def test_jobs_keep_their_state_between_calls() -> None:
    with LOCAL.start("tally", _Tally, [(0,), (100,)]) as jobs:
        assert jobs.call("add", 1) == [1, 101]
        assert jobs.call_each("add", [(10,), (20,)]) == [11, 121]


def test_a_job_that_cannot_be_made_is_named_before_any_call() -> None:
    with pytest.raises(AsrdistError, match=r"^tally job 2/2: negative start -1$"):
        LOCAL.start("tally", _Tally, [(0,), (-1,)])
    assert mp.active_children() == []


def test_yielded_items_are_progress_and_the_result() -> None:
    bar = Progress(10, "count", "item")
    assert LOCAL.map("count", _count, [(4,), (6,)], bar) == [[0, 1, 2, 3], list(range(6))]
    assert bar.n == 10


def test_the_first_error_wins_names_its_job_and_stops_the_others() -> None:
    start = time.monotonic()
    with pytest.raises(AsrdistError, match=r"^fail job 2/3: utterance u7: bad input$"):
        LOCAL.map("fail", _fails_or_sleeps, [("sleep",), ("asrdist",), ("sleep",)])
    assert time.monotonic() - start < 60  # the sleepers (120 s) were stopped
    assert mp.active_children() == []


def test_an_error_in_a_child_keeps_its_type_and_tells_where() -> None:
    with pytest.raises(ValueError, match="a bug") as caught:
        LOCAL.map("buggy", _fails_or_sleeps, [("sleep",), ("value",)])
    note = "\n".join(caught.value.__notes__)
    assert "raised in buggy job 2/2" in note and "_fails_or_sleeps" in note
    assert mp.active_children() == []


def test_a_job_whose_process_dies_does_not_hang_the_others() -> None:
    with pytest.raises(AsrdistError, match=r"dies job 1/2: .*exit code 3"):
        LOCAL.map("dies", _fails_or_sleeps, [("exit",), ("sleep",)])
    assert mp.active_children() == []


def test_a_single_job_in_this_process_is_named_too() -> None:
    with pytest.raises(AsrdistError, match=r"^one job 1/1: utterance u7"):
        LOCAL.map("one", _fails_or_sleeps, [("asrdist",)])


def _write_pid_and_sleep(where: str) -> None:
    with open(f"{where}.{os.getpid()}", "w"):
        pass
    time.sleep(120)


def test_jobs_die_with_their_parent_however_it_dies(tmp_path) -> None:
    """A parent killed outright (SIGKILL: no clean-up of its own) takes its job processes along
    at once, instead of leaving them to work on (a killed asrdist-decode's decoders)."""
    parent = subprocess.Popen(
        [sys.executable, "-c", "from asrdist.jobs import LOCAL; from tests.test_jobs import "
         f"_write_pid_and_sleep as f; LOCAL.map('sleep', f, [({str(tmp_path / 'job')!r},)] * 2)"],
        cwd=Path(__file__).resolve().parents[1])
    deadline = time.monotonic() + 60
    while len(list(tmp_path.glob("job.*"))) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    pids = [int(p.suffix[1:]) for p in tmp_path.glob("job.*")]
    assert len(pids) == 2
    parent.kill()
    parent.wait()
    deadline = time.monotonic() + 1.0
    while any(_alive(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not any(_alive(pid) for pid in pids)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except FileNotFoundError:
        return False
