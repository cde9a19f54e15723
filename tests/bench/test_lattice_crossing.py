"""bench.lattice_crossing at tiny size: both paths run on the same lattices, the table printed,
and a path that wrote other bytes stops the bench instead of being timed."""

from __future__ import annotations

import sys

import pytest

from bench import lattice_crossing


def _run(monkeypatch, *args: str) -> None:
    monkeypatch.setattr(sys, "argv", ["lattice_crossing", "--utts", "8", "--reps", "1", *args])
    lattice_crossing.main()


def test_the_table_has_both_paths_and_their_ratio(monkeypatch, capsys):
    _run(monkeypatch)
    out = capsys.readouterr().out
    assert "| search (compiled) |" in out and "| now: flat arrays" in out
    assert "Now / before: " in out and "(8 utterances," in out


def test_paths_that_disagree_stop_the_bench(monkeypatch):
    wrong = lattice_crossing.crossing_after
    monkeypatch.setattr(lattice_crossing, "crossing_after",
                        lambda utt, flat: (b"x" + wrong(utt, flat)[0], wrong(utt, flat)[1]))
    with pytest.raises(SystemExit, match="different archives or best paths"):
        _run(monkeypatch)
