from __future__ import annotations

import numpy as np
import soundfile
from click.testing import CliRunner

from asrdist.cli.augment import main
from asrdist.kaldi.data_dir import Utterance, read_table, write_data_dir


def test_augment_writes_the_copies_and_says_how_much(tmp_path):
    wav = tmp_path / "a-1.wav"
    soundfile.write(wav, np.random.default_rng(0).uniform(-0.3, 0.3, 8000), 16000, "PCM_16")
    write_data_dir(tmp_path / "train", [Utterance("a-1", "a", "hello", str(wav))])
    result = CliRunner().invoke(main, [str(tmp_path / "train"), str(tmp_path / "aug"),
                                       "--speeds", "0.9 1.1", "--snr", "0,10",
                                       "--reverb-fraction", "1", "--noise-fraction", "1"])
    assert result.exit_code == 0, result.output
    assert "1 sp0.9, 1 sp1.1, 1 rev, 1 noise" in result.output
    assert sorted(read_table(tmp_path / "aug" / "utt2uniq")) == [
        "a-1", "noise1-a-1", "rev1-a-1", "sp0.9-a-1", "sp1.1-a-1"]


def test_bad_input_is_one_line_error(tmp_path):
    result = CliRunner().invoke(main, [str(tmp_path / "nope"), str(tmp_path / "aug")])
    assert result.exit_code == 1 and result.output.startswith("Error: ")
    assert len(result.output.strip().splitlines()) == 1 and "nope" in result.output
    bad = CliRunner().invoke(main, [str(tmp_path), str(tmp_path / "aug"), "--snr", "5"])
    assert bad.exit_code == 2 and "--snr" in bad.output


def test_a_list_option_that_is_not_numbers_or_not_a_range_is_refused(tmp_path):
    for args, message in ((["--speeds", "0.9 fast"], "Invalid value for --speeds: '0.9 fast': "
                                                      "give numbers"),
                          (["--rt60", "0.3"], "Invalid value for --rt60: '0.3': give LOW,HIGH")):
        bad = CliRunner().invoke(main, [str(tmp_path), str(tmp_path / "aug"), *args])
        assert bad.exit_code == 2 and bad.output.strip().splitlines()[-1] == f"Error: {message}"
        assert not (tmp_path / "aug").exists()
