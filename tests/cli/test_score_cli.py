"""asrdist-score end to end, as a process: the %WER line, the subset table and the report."""

from __future__ import annotations

from tests.cli_process import run_cli


def test_score_cli_prints_wer_subsets_and_report(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    (data / "text").write_text("v1-u1 a b c d\nv1-u2 e f g\nv2-u3 h i\nv2-u4 j k l\n")
    (data / "utt2spk").write_text("v1-u1 v1\nv1-u2 v1\nv2-u3 v2\nv2-u4 v2\n")
    dec = tmp_path / "decode"
    dec.mkdir()
    (dec / "text").write_text("v1-u1 a x c d e\nv1-u2\nv2-u3 h i\n")
    report = tmp_path / "exp" / "results.md"
    proc = run_cli("score", "text", "--subsets-by", "spk", "--report", str(report),
                   str(data / "text"), str(dec))
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == f"%WER 66.67 [ 8 / 12, 1 ins, 6 del, 1 sub ] {dec / 'text'}"
    assert "Scored 4 sentences, 1 not present in hyp." in lines
    assert any(line.split()[:3] == ["v2", "2", "5"] for line in lines)
    assert "v2-u4" in proc.stderr  # the missing utterance is named
    text = report.read_text()
    assert "| 66.67 | 8 / 12 | 1 | 6 | 1 | 1 |" in text
    assert "asrdist-score text --subsets-by spk" in text
    assert (dec / "hyp.trn").read_text().splitlines()[-1] == "(v2-v2-u4)"


def test_score_cli_bad_input_is_one_line_error(tmp_path):
    (tmp_path / "ref").write_text("")
    (tmp_path / "hyp").write_text("")
    proc = run_cli("score", "text", str(tmp_path / "ref"), str(tmp_path / "hyp"))
    assert proc.returncode == 1
    assert proc.stderr.strip() == "Error: empty test set: the reference has no utterances"


def test_score_cli_refuses_hypothesis_word_not_in_words_txt(tmp_path):
    (tmp_path / "ref").write_text("u1 a b\n")
    (tmp_path / "hyp").write_text("u1 a zz\n")
    (tmp_path / "words.txt").write_text("<eps> 0\na 1\nb 2\n")
    proc = run_cli("score", "text", "--words", str(tmp_path / "words.txt"), str(tmp_path / "ref"),
                str(tmp_path / "hyp"))
    assert proc.returncode == 1
    assert proc.stderr.strip() == (
        f"Error: {tmp_path / 'hyp'}: utterance u1: hypothesis word 'zz' is not in words.txt")


def test_score_cli_missing_hypothesis_is_one_line_error(tmp_path):
    (tmp_path / "ref").write_text("u1 a b\n")
    proc = run_cli("score", "text", str(tmp_path / "ref"), str(tmp_path / "nohyp"))
    assert proc.returncode == 1
    assert proc.stderr.strip() == (
        f"Error: {tmp_path / 'nohyp'}: no such hypothesis file or decode dir")


def test_score_cli_non_utf8_text_is_one_line_error(tmp_path):
    (tmp_path / "ref").write_bytes("u1 caf\xe9 b\n".encode("latin-1"))
    (tmp_path / "hyp").write_text("u1 a b\n")
    proc = run_cli("score", "text", str(tmp_path / "ref"), str(tmp_path / "hyp"))
    assert proc.returncode == 1
    assert proc.stderr.strip() == (f"Error: {tmp_path / 'ref'}:1: not UTF-8 text (byte 0xe9 at "
                                   "offset 6); convert it, e.g. iconv -f latin1 -t utf-8")


def test_score_cli_mode_missing_files_are_one_line_errors_naming_them(tmp_path):
    (tmp_path / "ref").write_text("u1 a b\n")
    proc = run_cli("score", "text", str(tmp_path / "ref"))
    assert proc.returncode == 1
    assert proc.stderr.strip() == (
        "Error: text mode needs REF_TEXT and HYP (a text file or decode dir): missing HYP")
    proc = run_cli("score", "hubscr", "--stm", str(tmp_path / "ref.stm"), str(tmp_path / "ctm"))
    assert proc.returncode == 1
    assert proc.stderr.strip() == (
        "Error: hubscr mode needs --stm STM, --glm GLM and a CTM (or a decode dir with --data): "
        "missing --glm GLM")


def test_score_cli_without_a_mode_names_both(tmp_path):
    proc = run_cli("score", str(tmp_path / "ref"), str(tmp_path / "hyp"))
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines()[-1] == (
        f"Error: '{tmp_path / 'ref'}' is no mode: asrdist-score takes 'text REF_TEXT HYP' or "
        "'hubscr --stm STM --glm GLM CTM'")
