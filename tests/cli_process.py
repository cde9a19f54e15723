"""Run an asrdist console script as its own process, as a user's shell would: the
virtualenv's scripts on PATH (wav.scp pipes call asrdist-sph2wav by name)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def run_cli(module: str, *args: str, text: bool = True,
            timeout: float = 600) -> subprocess.CompletedProcess:
    """``asrdist.cli.<module>``'s main with ``args``; output captured."""
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}"}
    return subprocess.run([sys.executable, "-m", f"asrdist.cli.{module}", *map(str, args)],
                          capture_output=True, text=text, timeout=timeout, env=env)
