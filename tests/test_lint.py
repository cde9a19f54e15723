"""The lint sees the whole tree: no tracked Python file is excluded from ``ruff check``.

ruff's (and pytest's, and .gitignore templates') defaults skip folders named like build
output (``dist``, ``build``); a package folder so named would silently escape the lint.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _ruff() -> str:
    exe = Path(sys.executable).with_name("ruff")
    found = str(exe) if exe.is_file() else shutil.which("ruff")
    if found is None:
        pytest.skip("ruff is not installed")
    return found


def test_ruff_checks_every_tracked_python_file() -> None:
    if not (ROOT / ".git").exists() or shutil.which("git") is None:
        pytest.skip("not a git checkout")
    tracked = subprocess.run(["git", "ls-files", "*.py"], cwd=ROOT, check=True,
                             capture_output=True, text=True).stdout.split()
    shown = subprocess.run([_ruff(), "check", "--show-files", "."], cwd=ROOT, check=True,
                           capture_output=True, text=True).stdout.splitlines()
    linted = {str(Path(line).resolve().relative_to(ROOT)) for line in shown if line.endswith(".py")}
    assert tracked, "git ls-files found no Python file"
    assert sorted(set(tracked) - linted) == []
