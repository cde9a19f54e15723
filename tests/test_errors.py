"""AsrdistError belongs to the library, not to click; the CLIs turn it into one line."""

from __future__ import annotations

import subprocess
import sys

from click.testing import CliRunner

from asrdist.cli import command
from asrdist.errors import AsrdistError


def test_the_library_error_does_not_need_click() -> None:
    code = "import sys, asrdist.errors; sys.exit('click' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0


def test_a_command_prints_a_library_error_on_one_line_and_exits_1() -> None:
    @command()
    def main() -> None:
        raise AsrdistError("data/train/feats.scp: missing")

    result = CliRunner().invoke(main, [])
    assert result.exit_code == 1
    assert result.output == "Error: data/train/feats.scp: missing\n"


def test_a_command_prints_an_os_error_with_its_file_on_one_line() -> None:
    @command()
    def main() -> None:
        raise OSError(28, "No space left on device", "exp/run/final.pt")

    result = CliRunner().invoke(main, [])
    assert result.exit_code == 1
    assert result.output == "Error: exp/run/final.pt: No space left on device\n"
