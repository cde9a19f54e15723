"""Every module of the asrdist package imports, all of them in one process.

The Kaldi wheels hang a process for some import orders (kaldilm, then kaldi_decoder;
kaldifst, kaldi_decoder or kaldilm before kaldi_hmm_gmm: DESIGN.md section 7), so the imports
run in a child process with a timeout: an order that hangs fails this test instead of the run.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
LIMIT_S = 240

# In the child: import each module in pkgutil's order, printing its name first, so a hang or
# an error names the module.
IMPORT_ALL = """
import importlib, pkgutil, sys
import asrdist
names = [m.name for m in pkgutil.walk_packages(asrdist.__path__, "asrdist.")]
for name in names:
    print(name, flush=True)
    importlib.import_module(name)
print("imported", len(names), "kaldi_decoder" in sys.modules, flush=True)
"""


@pytest.mark.timeout(LIMIT_S + 30)
def test_every_module_of_the_package_imports_in_one_process():
    try:
        proc = subprocess.run([sys.executable, "-c", IMPORT_ALL], cwd=REPO, capture_output=True,
                              text=True, timeout=LIMIT_S, check=False)
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode() if isinstance(exc.stdout, bytes) else exc.stdout or ""
        last = (out.strip().splitlines() or ["(none)"])[-1]
        pytest.fail(f"importing the package hangs (> {LIMIT_S} s) at {last}")
    assert proc.returncode == 0, proc.stdout[-1000:] + proc.stderr[-3000:]
    *modules, summary = proc.stdout.strip().splitlines()
    assert summary == f"imported {len(modules)} False", summary  # nothing needs kaldi_decoder
    assert {"asrdist.cli.train", "asrdist.parallel.launch.rendezvous",
            "asrdist.decode.graph"} <= set(modules)
