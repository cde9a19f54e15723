"""asrdist-lmrescore --cmd slurm.pl on the private one-node Slurm cluster: one job per lattice
archive through sbatch, Kaldi's log/lmrescore.N.log, the same archives as run.pl's."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests import slurm_cluster
from tests.cli.test_lmrescore_cli import EXPECTED, dirs  # noqa: F401 - a fixture used below

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    yield from slurm_cluster.for_module(tmp_path_factory)


def _rescore(cluster, root: Path, out: Path, *cmd: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "asrdist.cli.lmrescore", *cmd, "--skip-scoring",
         str(root / "lang"), str(EXPECTED / "fg.arpa"), str(root / "data"),
         str(root / "decode"), str(out)],
        capture_output=True, text=True, timeout=240, env=cluster.env)


def test_rescoring_jobs_go_through_sbatch_and_give_run_pl_s_archives(cluster, dirs, tmp_path):  # noqa: F811
    local = _rescore(cluster, dirs, tmp_path / "local")
    assert local.returncode == 0, local.stderr
    slurm = _rescore(cluster, dirs, tmp_path / "slurm", "--cmd", "slurm.pl --mem 500M")
    assert slurm.returncode == 0, slurm.stderr
    for name in ("lat.1.gz", "lat.2.gz", "num_jobs"):
        assert (tmp_path / "slurm" / name).read_bytes() == \
            (tmp_path / "local" / name).read_bytes(), name
    logs = [(tmp_path / "slurm" / "log" / f"lmrescore.{n}.log").read_text() for n in (1, 2)]
    assert all("# Ended (code 0) at " in text for text in logs), logs
