"""asrdist-align-gmm: the command line over a synthetic corpus."""

from __future__ import annotations

import logging
from pathlib import Path

import kaldi_hmm_gmm  # noqa: F401  (before anything that loads kaldifst)
import pytest
from click.testing import CliRunner

from asrdist.cli.align_gmm import main
from tests.gmm.synth_corpus import make_corpus


def test_cli_writes_alignment_dir_then_skips_or_redoes(tmp_path: Path, caplog) -> None:
    caplog.set_level(logging.INFO)
    corpus = make_corpus(tmp_path / "c", num_utts=12)
    exp = tmp_path / "exp" / "mono"
    paths = [str(corpus.data), str(corpus.lang), str(exp)]
    args = ["--nj", "1", "--num-iters", "4", "--total-gauss", "30", *paths]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    assert "12/12 utterances aligned" in result.output
    assert (exp / "final.mdl").is_file() and (exp / "ali.1.gz").is_file()
    model = (exp / "final.mdl").stat().st_mtime_ns

    again = CliRunner().invoke(main, ["--nj", "2", *args[2:]])  # --nj alone: still done
    assert again.exit_code == 0 and "aligned" not in again.output
    assert (f"{exp}: align_gmm already done with these options and inputs; skipping "
            f"(remove {exp / '.align_gmm.done'} to redo); compared ") in caplog.text
    assert (exp / "final.mdl").stat().st_mtime_ns == model

    fewer = CliRunner().invoke(main, ["--nj", "1", "--num-iters", "3", "--total-gauss", "30",
                                      *paths])
    assert fewer.exit_code == 0 and "12/12 utterances aligned" in fewer.output
    assert (f"{exp}: align_gmm was done with other options or inputs (num_iters 4 -> 3); "
            "redoing it") in caplog.messages
    assert (exp / "final.mdl").stat().st_mtime_ns != model

    text = corpus.data / "text"
    lines = text.read_text().splitlines()
    text.write_text("\n".join(lines[:-1]) + "\n")  # a transcript less: that utterance fails
    changed = CliRunner().invoke(main, ["--nj", "1", "--num-iters", "3", "--total-gauss", "30",
                                        *paths])
    assert f"input {text} changed" in caplog.text
    assert changed.exit_code == 1 and "no transcript for utterance" in changed.output
    assert not (exp / ".align_gmm.done").exists()  # the failed redo left nothing complete


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


@pytest.mark.parametrize(("option", "message"), [
    (["--num-iters", "0"], "--nj, --num-iters and --total-gauss must be positive"),
    (["--boost-silence", "0"], "--boost-silence 0.0: must be positive"),
])
def test_cli_non_positive_option_is_one_line_error(tmp_path: Path, option, message) -> None:
    corpus = make_corpus(tmp_path / "c", num_utts=2)
    result = CliRunner().invoke(main, [*option, str(corpus.data), str(corpus.lang),
                                       str(tmp_path / "mono")])
    assert result.exit_code == 1
    assert result.output.strip() == f"Error: {message}"
    assert not (tmp_path / "mono").exists()


def test_seed_gives_another_model_and_zero_is_the_default_run(tmp_path: Path, caplog) -> None:
    """--seed draws the mixing up's perturbations: --seed 0 is the run made without it
    (skipped), --seed 1 redoes it, saying so, into another model."""
    caplog.set_level(logging.INFO)
    corpus = make_corpus(tmp_path / "c", num_utts=12)
    exp = tmp_path / "exp" / "mono"
    args = ["--nj", "1", "--num-iters", "6", "--total-gauss", "40", str(corpus.data),
            str(corpus.lang), str(exp)]
    assert CliRunner().invoke(main, args).exit_code == 0
    default = (exp / "final.mdl").read_bytes()
    zero = CliRunner().invoke(main, ["--seed", "0", *args])
    assert zero.exit_code == 0 and "aligned" not in zero.output  # done already
    one = CliRunner().invoke(main, ["--seed", "1", *args])
    assert one.exit_code == 0 and "12/12 utterances aligned" in one.output
    assert any("was done with other options" in m and "seed" in m for m in caplog.messages)
    assert (exp / "final.mdl").read_bytes() != default
