"""asrdist-train-deltas, -lda-mllt and -sat, and asrdist-est-fmllr: the command lines over a
synthetic corpus."""

from __future__ import annotations

import kaldi_hmm_gmm  # noqa: F401  (before anything that loads kaldifst)
import pytest
from click.testing import CliRunner

from asrdist.cli.align_gmm import main as align_gmm
from asrdist.cli.est_fmllr import main as est_fmllr
from asrdist.cli.train_tri import deltas_main, lda_mllt_main, sat_main
from tests.gmm.synth_corpus import make_corpus


@pytest.fixture(scope="module")
def mono(tmp_path_factory):
    root = tmp_path_factory.mktemp("tri_cli")
    corpus = make_corpus(root / "c", num_utts=24, coarticulation=3.0)
    out = CliRunner().invoke(align_gmm, ["--nj", "1", "--num-iters", "6", "--total-gauss", "60",
                                         str(corpus.data), str(corpus.lang), str(root / "mono")])
    assert out.exit_code == 0, out.output
    return corpus, root


def test_the_trainers_run_from_the_command_line(mono):
    corpus, root = mono
    small = ["--nj", "1", "--num-leaves", "30", "--total-gauss", "90", "--num-iters", "7",
             "--realign-iters", "3 5"]
    tri1 = CliRunner().invoke(deltas_main, [*small, str(corpus.data), str(corpus.lang),
                                            str(root / "mono"), str(root / "tri1")])
    assert tri1.exit_code == 0, tri1.output
    assert "24/24 utterances aligned" in tri1.output and (root / "tri1" / "tree").is_file()
    tri2 = CliRunner().invoke(lda_mllt_main, [*small, "--dim", "12", "--mllt-iters", "2",
                                              str(corpus.data), str(corpus.lang),
                                              str(root / "tri1"), str(root / "tri2")])
    assert tri2.exit_code == 0, tri2.output
    assert (root / "tri2" / "final.mat").is_file()
    tri3 = CliRunner().invoke(sat_main, [*small, "--fmllr-iters", "2", str(corpus.data),
                                         str(corpus.lang), str(root / "tri2"), str(root / "tri3")])
    assert tri3.exit_code == 0, tri3.output
    assert (root / "tri3" / "trans.ark").is_file() and (root / "tri3" / "final.mat").is_file()
    no_lattices = CliRunner().invoke(est_fmllr, [str(corpus.lang), str(root / "tri3"),
                                                 str(corpus.data), str(root / "tri1"),
                                                 str(root / "trans.ark")])
    assert no_lattices.exit_code == 1 and "no lat.*.gz" in no_lattices.output
    assert "Traceback" not in no_lattices.output and not (root / "trans.ark").exists()


def test_bad_options_and_a_missing_alignment_dir_are_one_line(mono, tmp_path):
    corpus, root = mono
    bad = CliRunner().invoke(deltas_main, ["--realign-iters", "ten", str(corpus.data),
                                           str(corpus.lang), str(root / "mono"),
                                           str(tmp_path / "tri1")])
    assert bad.exit_code != 0 and "--realign-iters" in bad.output
    missing = CliRunner().invoke(deltas_main, [str(corpus.data), str(corpus.lang),
                                               str(tmp_path / "nowhere"), str(tmp_path / "t")])
    assert missing.exit_code == 1
    assert "Error:" in missing.output and "nowhere" in missing.output
    assert "Traceback" not in missing.output
