from __future__ import annotations

from click.testing import CliRunner

from asrdist.cli.align_aug import main


def test_missing_inputs_are_one_line_errors(tmp_path):
    data = tmp_path / "aug_mfcc"
    data.mkdir()
    result = CliRunner().invoke(main, [str(data), str(tmp_path / "lang"), str(tmp_path / "mono"),
                                       str(tmp_path / "ali")])
    assert result.exit_code == 1
    expected = f"Error: {data / 'feats.scp'}: missing (run asrdist-features first)"
    assert result.output.strip() == expected


def test_a_non_positive_boost_silence_is_one_line_error(tmp_path):
    result = CliRunner().invoke(main, ["--boost-silence", "0", str(tmp_path / "aug"),
                                       str(tmp_path / "lang"), str(tmp_path / "mono"),
                                       str(tmp_path / "ali")])
    assert result.exit_code == 1
    assert result.output.strip() == "Error: --boost-silence 0.0: must be positive"
    assert not (tmp_path / "ali").exists()
