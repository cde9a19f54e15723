"""bench.sequence_memory at tiny size: every scale measured and tabled, every lattice read back,
and a case that leaves a file in its TMPDIR stops the bench."""

from __future__ import annotations

import re
import sys

import pytest

from bench import sequence_memory


def _run(monkeypatch, tmp_path) -> None:
    monkeypatch.setattr(sys, "argv", ["sequence_memory", "--dir", str(tmp_path), "--base-utts",
                                      "6", "--scales", "1", "2", "--nj", "2", "--width", "2"])
    sequence_memory.main()


def test_the_table_has_every_scale(monkeypatch, tmp_path, capsys):
    _run(monkeypatch, tmp_path)
    out = capsys.readouterr().out
    rows = re.findall(r"^\| this tree \(\w+\) \| (\d)x \| (\d+) \| .* \| (\d+) \| (\d+) \|"
                      r" [\d.]+ \| [\d.]+ \|$", out, re.M)
    assert [(scale, utts) for scale, utts, _, _ in rows] == [("1", "6"), ("2", "12")]
    assert all(int(hwm) >= int(rss) > 0 for _, _, hwm, rss in rows)
    assert "peak RSS grows" in out
    index = re.search(r"keep in memory: (\d+) bytes per utterance", out)
    assert index and 50 < int(index.group(1)) < 2000  # an index entry, not the arrays
    assert not list(tmp_path.glob("*/spill-*"))


def test_a_file_left_in_tmpdir_stops_the_bench(monkeypatch, tmp_path):
    monkeypatch.setattr(sequence_memory, "CODE", "import tempfile; open(tempfile.gettempdir() "
                        "+ '/kept', 'w'); print('[0, 0, 0, 0, 0]')")
    with pytest.raises(SystemExit, match=r"left \['kept'\] in its TMPDIR"):
        _run(monkeypatch, tmp_path)
