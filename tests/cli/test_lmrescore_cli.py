"""asrdist-lmrescore on a decode dir of latgen-faster-mapped's lattices (split over two
archives): the rescored archives hold Kaldi's rescored lattices (kaldi_expected/), the sweep's
texts their best paths; a rerun skips; bad input is one line."""

from __future__ import annotations

import gzip
import shutil
from pathlib import Path

import pytest

from asrdist.decode.lattice_io import compact_lattice_binary
from asrdist.decode.lmrescore import read_lattice_archive
from tests.cli_process import run_cli

EXPECTED = Path(__file__).parents[1] / "decode" / "kaldi_expected"


@pytest.fixture(scope="module")
def dirs(tmp_path_factory) -> Path:
    """ROOT/lang (G.fst, words.txt, oov.int, final.mdl, phones/align_lexicon.int: a graph dir
    as asrdist-mkgraph writes it), ROOT/data, ROOT/decode (lat.1.gz: utt1 utt2, lat.2.gz: utt3
    noise1, num_jobs 2)."""
    root = tmp_path_factory.mktemp("lmrescore")
    (root / "lang" / "phones").mkdir(parents=True)
    for name in ("G.fst", "words.txt", "oov.int", "final.mdl", "phones/align_lexicon.int"):
        shutil.copy(EXPECTED / name, root / "lang" / name)
    (root / "data").mkdir()
    lattices = list(read_lattice_archive(EXPECTED / "lat.1.bin").items())
    (root / "decode").mkdir()
    for n, part in enumerate((lattices[:2], lattices[2:]), 1):
        (root / "decode" / f"lat.{n}.gz").write_bytes(
            gzip.compress(b"".join(compact_lattice_binary(k, c) for k, c in part)))
    (root / "decode" / "num_jobs").write_text("2\n")
    return root


def rescore(root: Path, out: str, *options: str, lm: Path = EXPECTED / "fg.arpa"):
    return run_cli("lmrescore", *options, "--lmwt", "5 9", "--wip", "0.0 1.0",
                   root / "lang", lm, root / "data", root / "decode", root / out)


def test_rescored_decode_dir_holds_kaldis_lattices_and_best_paths(dirs):
    done = rescore(dirs, "decode_fg", "--nj", "2")
    assert done.returncode == 0, done.stderr
    out = dirs / "decode_fg"
    assert (out / "num_jobs").read_text() == "2\n"
    kaldi = read_lattice_archive(EXPECTED / "rescored.1.bin")
    ours = {**read_lattice_archive(out / "lat.1.gz"), **read_lattice_archive(out / "lat.2.gz")}
    assert list(read_lattice_archive(out / "lat.1.gz")) == ["utt1", "utt2"]
    for key, clat in kaldi.items():
        assert (ours[key].arcs, ours[key].final) == (clat.arcs, clat.final)
    words = {i: w for w, i in (line.split() for line in
                               (EXPECTED / "words.txt").read_text().splitlines())}
    for line in (EXPECTED / "rescored_sweep.txt").read_text().splitlines():
        lmwt, wip, utt, *best = line.split()
        if lmwt in ("5", "9") and wip in ("0.0", "1.0"):
            hyps = dict(row.partition(" ")[::2] for row in
                        (out / f"score_{lmwt}_{wip}" / "text").read_text().splitlines())
            assert hyps[utt].split() == [words[w] for w in best]
    assert (out / "text").is_file()
    ctm = (out / "score_9_1.0" / "ctm").read_text().splitlines()  # word times, as decode's
    assert [line.split()[4] for line in ctm if line.startswith("utt1 ")] == \
        hyps["utt1"].split()

    again = rescore(dirs, "decode_fg", "--nj", "1")  # --nj is no change: skipped
    assert again.returncode == 0
    assert "already done" in again.stderr


def test_one_job_equals_two(dirs):
    assert rescore(dirs, "decode_fg1", "--nj", "1", "--skip-scoring").returncode == 0
    assert rescore(dirs, "decode_fg2", "--skip-scoring").returncode == 0
    for n in (1, 2):
        assert (dirs / "decode_fg1" / f"lat.{n}.gz").read_bytes() == \
            (dirs / "decode_fg2" / f"lat.{n}.gz").read_bytes()
    assert not (dirs / "decode_fg1" / "text").exists()


def test_a_lang_dir_with_g_carpa_rescores_the_same(dirs, tmp_path):
    """lmrescore_const_arpa.sh's NEW_LANG: Kaldi's G.carpa read as it is."""
    (tmp_path / "lang_fg").mkdir()
    shutil.copy(EXPECTED / "G.carpa", tmp_path / "lang_fg" / "G.carpa")
    done = rescore(dirs, "decode_carpa", "--skip-scoring", lm=tmp_path / "lang_fg")
    assert done.returncode == 0, done.stderr
    out = dirs / "decode_carpa"
    ours = {**read_lattice_archive(out / "lat.1.gz"), **read_lattice_archive(out / "lat.2.gz")}
    for key, clat in read_lattice_archive(EXPECTED / "rescored.1.bin").items():
        assert (ours[key].arcs, ours[key].final) == (clat.arcs, clat.final)


def test_a_bad_arpa_file_is_one_line(dirs, tmp_path):
    bad = tmp_path / "bad.arpa.gz"
    bad.write_bytes(gzip.compress(b"\\data\\\nngram 1=1\n\n\\1-grams:\n-1.0\n\\end\\\n"))
    failed = rescore(dirs, "decode_bad", lm=bad)
    assert failed.returncode == 1
    last = failed.stderr.strip().splitlines()[-1]  # the job that read it, then the file's line
    assert last.startswith("Error: lmrescore job ")
    assert last.endswith(f"{bad}:5: invalid 1-gram line '-1.0' (expected 'logprob word')")


def test_rescoring_into_the_input_dir_is_refused(dirs):
    failed = run_cli("lmrescore", dirs / "lang", EXPECTED / "fg.arpa", dirs / "data",
                     dirs / "decode", dirs / "decode" / ".")
    assert failed.returncode == 1
    assert "the output dir is the input dir" in failed.stderr
    assert (dirs / "decode" / "lat.1.gz").is_file()


def test_a_decode_dir_without_lattices_is_one_line(dirs, tmp_path):
    (tmp_path / "num_jobs").write_text("3\n")
    failed = run_cli("lmrescore", dirs / "lang", EXPECTED / "fg.arpa", dirs / "data", tmp_path,
                     tmp_path / "out")
    assert failed.returncode == 1
    assert f"Error: {tmp_path}: no lat.1.gz, lat.2.gz, lat.3.gz (num_jobs says 3)" in \
        failed.stderr


def test_lattices_of_a_graph_with_other_words_are_refused_in_one_line(dirs, tmp_path):
    """asrdist-decode keeps its graph's words.txt in the decode dir: one of other words than
    OLD_LANG's is refused before any rescoring (it was '0 lattices rescored, 5 dropped',
    exit 0, a done marker and an empty text)."""
    decoded = tmp_path / "decode"
    shutil.copytree(dirs / "decode", decoded)
    words = (dirs / "lang" / "words.txt").read_text().replace("cat ", "kitten ")
    (decoded / "words.txt").write_text(words)
    failed = run_cli("lmrescore", dirs / "lang", EXPECTED / "fg.arpa", dirs / "data", decoded,
                     tmp_path / "out")
    assert failed.returncode == 1
    assert failed.stderr.strip().splitlines()[-1] == (
        f"Error: {decoded / 'words.txt'}: the lattices were made with a graph of other words "
        f"than {dirs / 'lang' / 'words.txt'}: rescore with the lang dir that graph was made "
        "from")
    assert not (tmp_path / "out").exists()


def test_every_lattice_dropped_is_one_line_and_no_done_marker(dirs, tmp_path):
    """A new LM none of whose paths the lattices' words take (here: no word at all) leaves
    every lattice of words empty (lat.1.gz's two): refused, nothing that looks like a
    rescored dir left."""
    wordless = tmp_path / "wordless.arpa"
    wordless.write_text("\\data\\\nngram 1=2\n\n\\1-grams:\n-0.3\t</s>\n-99\t<s>\n\n\\end\\\n")
    decoded = tmp_path / "decode"
    decoded.mkdir()
    shutil.copy(dirs / "decode" / "lat.1.gz", decoded)
    (decoded / "num_jobs").write_text("1\n")
    out = tmp_path / "out"
    failed = run_cli("lmrescore", dirs / "lang", wordless, dirs / "data", decoded, out)
    assert failed.returncode == 1
    assert failed.stderr.strip().splitlines()[-1] == (
        f"Error: {decoded}: every one of its 2 lattices is empty after rescoring with "
        f"{wordless} (made with another graph than {dirs / 'lang'}'s, or an LM of other "
        "words?): nothing written")
    assert sorted(p.name for p in out.iterdir() if not p.name.startswith("log")) == []
