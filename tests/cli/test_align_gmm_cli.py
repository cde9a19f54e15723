"""asrdist-align-gmm: the command line over a synthetic corpus."""

from __future__ import annotations

from pathlib import Path

import kaldi_hmm_gmm  # noqa: F401  (before anything that loads kaldifst)
from click.testing import CliRunner

from asrdist.cli.align_gmm import main
from tests.gmm.synth_corpus import make_corpus


def test_cli_writes_alignment_dir_then_skips(tmp_path: Path) -> None:
    corpus = make_corpus(tmp_path / "c", num_utts=12)
    exp = tmp_path / "exp" / "mono"
    args = ["--nj", "1", "--num-iters", "4", "--total-gauss", "30",
            str(corpus.data), str(corpus.lang), str(exp)]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    assert "12/12 utterances aligned" in result.output
    assert (exp / "final.mdl").is_file() and (exp / "ali.1.gz").is_file()
    again = CliRunner().invoke(main, args)
    assert again.exit_code == 0 and "already done" in again.output


def test_cli_oov_fails_with_one_line(tmp_path: Path) -> None:
    corpus = make_corpus(tmp_path / "c", num_utts=6)
    text = corpus.data / "text"
    lines = text.read_text().splitlines()
    lines[0] = f"{lines[0].split()[0]} a qq"
    text.write_text("\n".join(lines) + "\n")
    result = CliRunner().invoke(main, ["--nj", "1", str(corpus.data), str(corpus.lang),
                                       str(tmp_path / "mono")])
    assert result.exit_code == 1
    assert "word 'qq' is not in" in result.output and "--map-oov" in result.output


def test_cli_map_oov_trains_past_an_oov_word(tmp_path: Path) -> None:
    corpus = make_corpus(tmp_path / "c", num_utts=6)
    text = corpus.data / "text"
    lines = text.read_text().splitlines()
    lines[0] = f"{lines[0]} qq"
    text.write_text("\n".join(lines) + "\n")
    exp = tmp_path / "mono"
    result = CliRunner().invoke(main, ["--nj", "1", "--num-iters", "2", "--total-gauss", "20",
                                       "--map-oov", str(corpus.data), str(corpus.lang), str(exp)])
    assert result.exit_code == 0, result.output
    assert "/6 utterances aligned" in result.output and (exp / "ali.1.gz").is_file()


def test_cli_non_positive_option_is_one_line_error(tmp_path: Path) -> None:
    corpus = make_corpus(tmp_path / "c", num_utts=2)
    result = CliRunner().invoke(main, ["--num-iters", "0", str(corpus.data), str(corpus.lang),
                                       str(tmp_path / "mono")])
    assert result.exit_code == 1
    assert result.output.strip() == "Error: --nj, --num-iters and --total-gauss must be positive"
    assert not (tmp_path / "mono").exists()
