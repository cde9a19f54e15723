"""asrdist-lattice-post against Kaldi's own lattice-to-post and lattice-to-smbr-post on real
lattices (three FSDD clips decoded by a digits monophone GMM): tests/decode/kaldi_post holds
the inputs, Kaldi's outputs and make_expected.sh, the command that made them."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from asrdist.cli.lattice_post import main

HERE = Path(__file__).parent / "kaldi_post"
Posteriors = dict[str, list[list[tuple[int, float]]]]


def read_text_posteriors(path: Path) -> Posteriors:
    """A Kaldi text Posterior archive: ``utt [ tid p tid p ] [ ... ]`` per line."""
    out = {}
    for line in path.read_text().splitlines():
        key, rest = line.split(" ", 1)
        frames = (f.split() for f in re.findall(r"\[([^\]]*)\]", rest))
        out[key] = [[(int(t), float(p)) for t, p in zip(f[::2], f[1::2], strict=True)]
                    for f in frames]
    return out


def assert_close(ours: Posteriors, kaldi: Posteriors, rel: float) -> None:
    assert ours.keys() == kaldi.keys()
    for utt in kaldi:
        assert len(ours[utt]) == len(kaldi[utt]), utt
        for t, (mine, theirs) in enumerate(zip(ours[utt], kaldi[utt], strict=True)):
            assert [tid for tid, _ in mine] == [tid for tid, _ in theirs], (utt, t)
            for (_, p), (_, q) in zip(mine, theirs, strict=True):
                assert p == pytest.approx(q, rel=rel, abs=1e-11), (utt, t)


def run(tmp_path: Path, *options: str) -> Posteriors:
    lattices = tmp_path / "lats"
    lattices.mkdir(exist_ok=True)
    shutil.copy(HERE / "lat.1.gz", lattices)
    out = tmp_path / "post.txt"
    result = CliRunner().invoke(main, ["--acoustic-scale", "0.1", *options, str(lattices),
                                       str(out)])
    assert result.exit_code == 0, result.output
    return read_text_posteriors(out)


def test_posteriors_equal_lattice_to_post(tmp_path):
    """Equal to the printed digit: the scaled weights are stored as floats as Kaldi does."""
    ours = run(tmp_path)
    assert_close(ours, read_text_posteriors(HERE / "post.txt"), rel=1e-6)
    assert len(ours["george-0-000"]) == 28


@pytest.mark.parametrize("flag, expected", [((), "smbr.txt"),
                                            (("--one-silence-class",), "smbr_one_silence.txt")])
def test_smbr_posteriors_equal_lattice_to_smbr_post(tmp_path, flag, expected):
    """Signed shares that are differences of near-equal accuracies agree to a few parts in a
    million (Kaldi sums each chain arc's accuracy apart, asrdist a compact arc's at once)."""
    ours = run(tmp_path, "--smbr", "--alignments", str(HERE), "--trans-mdl",
               str(HERE / "final.mdl"), "--silence-phones", "1:2", *flag)
    assert_close(ours, read_text_posteriors(HERE / expected), rel=1e-5)
