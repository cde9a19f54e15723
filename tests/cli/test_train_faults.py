"""asrdist-train under faults of its machine: a full disk is one line that says so."""

from __future__ import annotations

import subprocess

import pytest
from click.testing import CliRunner

from asrdist.cli.train import main
from asrdist.testing import make_corpus

TINY = ["--layers=1", "--units=8", "--chunk-len=10", "--batch-size=8", "--shuffle-buffer=16",
        "--heldout-utts=2", "--lr-ref-batch=8", "--log-every=2", "--epochs=2"]


@pytest.fixture
def small_disk(tmp_path):
    """A 256 KiB tmpfs (root only), unmounted afterwards."""
    mount = tmp_path / "disk"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(mount)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs to fill: {done.stderr.strip()}")
    yield mount
    subprocess.run(["umount", "-l", str(mount)], check=False)


def test_full_disk_is_one_line_naming_the_file_and_leaves_no_partial_file(tmp_path, small_disk):
    data, targets = make_corpus(tmp_path / "corpus")
    out = small_disk / "run"
    filler = small_disk / "filler"
    filler.write_bytes(b"\0" * 200 * 1024)  # the run dir's first files fit; a checkpoint not
    result = CliRunner().invoke(main, ["--data", str(data), "--targets", str(targets),
                                       "--out", str(out), *TINY])
    assert result.exit_code == 1, result.output
    lines = result.output.strip().splitlines()
    assert lines[-1].startswith(f"Error: {out}/") and "No space left on device" in lines[-1], lines
    assert "Traceback" not in result.output
    assert not list(out.rglob("*.tmp")) and not (out / "final.pt").exists()
