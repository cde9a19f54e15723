"""asrdist-align-nnet: the command line over the tiny system."""

from __future__ import annotations

import kaldi_hmm_gmm  # noqa: F401  (before anything that loads kaldifst)
from click.testing import CliRunner

from asrdist.cli.align_nnet import main
from asrdist.testing.tiny_system import make_system, write_identity_nnet, write_test_data


def test_cli_aligns_then_skips_and_names_a_missing_model(tmp_path):
    system = make_system(tmp_path / "sys")
    write_test_data(system, tmp_path / "data", {"a-1": "cat sat", "a-2": "dog sit"}, "nnet")
    write_identity_nnet(system, tmp_path / "final.pt")
    paths = [str(tmp_path / "data"), str(system.lang), str(system.mono), str(tmp_path / "ali")]
    first = CliRunner().invoke(main, ["--model", str(tmp_path / "final.pt"), *paths])
    assert first.exit_code == 0, first.output
    assert "2 aligned" in first.output and "0 failed" in first.output
    assert (tmp_path / "ali" / "ali.2.gz").is_file()
    again = CliRunner().invoke(main, ["--model", str(tmp_path / "final.pt"), *paths])
    assert again.exit_code == 0 and "aligned" not in again.output
    missing = CliRunner().invoke(main, ["--model", str(tmp_path / "none.pt"), *paths[:3],
                                        str(tmp_path / "ali2")])
    assert missing.exit_code == 1
    assert missing.output.strip().startswith("Error: ") and "none.pt" in missing.output
    assert len(missing.output.strip().splitlines()) == 1
    assert not (tmp_path / "ali2" / "final.mdl").exists()
