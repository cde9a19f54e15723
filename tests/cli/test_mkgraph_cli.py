"""asrdist-mkgraph as a process: a graph dir from a lang dir, a final.mdl and training text."""

from __future__ import annotations

from asrdist.testing.tiny_system import make_system
from tests.cli_process import run_cli


def test_mkgraph_cli_builds_graph_and_skips_when_done(tmp_path):
    system = make_system(tmp_path / "sys")
    args = ["--lang", str(system.lang), "--model", str(system.mono / "final.mdl"),
            "--text", str(system.train_text), "--order", "2", "--out", str(tmp_path / "graph")]
    proc = run_cli("mkgraph", *args)
    assert proc.returncode == 0, proc.stderr
    assert "ngram 2=" in (tmp_path / "graph" / "lm.arpa").read_text()
    assert (tmp_path / "graph" / "log" / "mkgraph.log").read_text().startswith(
        "# asrdist-mkgraph --lang")
    hclg = (tmp_path / "graph" / "HCLG.fst").stat().st_mtime_ns
    again = run_cli("mkgraph", *args)
    assert again.returncode == 0
    assert (f"{tmp_path / 'graph'}: mkgraph already done with these options and inputs; "
            f"skipping (remove {tmp_path / 'graph' / '.mkgraph.done'} to redo)") in again.stderr
    assert (tmp_path / "graph" / "HCLG.fst").stat().st_mtime_ns == hclg

    other = run_cli("mkgraph", *args[:-4], "--order", "3", "--out", str(tmp_path / "graph"))
    assert other.returncode == 0, other.stderr
    assert "mkgraph was done with other options or inputs (order 2 -> 3); redoing it" \
        in other.stderr
    assert "ngram 3=" in (tmp_path / "graph" / "lm.arpa").read_text()
    assert (tmp_path / "graph" / "HCLG.fst").stat().st_mtime_ns != hclg
    assert "--order 3" in (tmp_path / "graph" / "log" / "mkgraph.log").read_text()

    with open(system.train_text, "a") as f:  # more training text: another LM
        f.write("extra-utt dog sat\n")
    changed = run_cli("mkgraph", *args[:-4], "--order", "3", "--out", str(tmp_path / "graph"))
    assert changed.returncode == 0, changed.stderr
    assert f"input {system.train_text} changed" in changed.stderr


def test_mkgraph_cli_missing_lang_is_one_line_error(tmp_path):
    system = make_system(tmp_path / "sys")
    proc = run_cli("mkgraph", "--lang", str(tmp_path / "nolang"),
                   "--model", str(system.mono / "final.mdl"), "--text", str(system.train_text),
                   "--out", str(tmp_path / "graph"))
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines()[-1] == f"Error: {tmp_path / 'nolang'}: no such lang dir"


def test_mkgraph_cli_missing_tree_is_refused(tmp_path):
    system = make_system(tmp_path / "sys")
    proc = run_cli("mkgraph", "--lang", str(system.lang), "--model", str(system.mono / "final.mdl"),
                "--tree", str(tmp_path / "notree"), "--text", str(system.train_text),
                "--out", str(tmp_path / "graph"))
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines()[-1] == (
        f"Error: {tmp_path / 'notree'}: no such tree (--tree)")
    assert not (tmp_path / "graph" / "HCLG.fst").exists()
