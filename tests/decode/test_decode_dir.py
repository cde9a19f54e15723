"""A decode dir made as decode.sh + score_sclite.sh make one, against Kaldi's own outputs on the
same scores and graph (kaldi_expected/: latgen-faster-mapped's lat.1.gz, the 39-point
lattice-best-path sweep and the lattice-1best | lattice-align-words-lexicon | nbest-to-ctm word
times; commands in its README)."""

from __future__ import annotations

import gzip
from pathlib import Path

import kaldiio
import numpy as np
import pytest

from asrdist.decode.decode_dir import decode_data_dir
from asrdist.decode.lattice import LatticeOptions
from asrdist.decode.lattice_io import iter_lattices_binary
from asrdist.errors import AsrdistError
from asrdist.stage import Skipped
from tests.decode.test_lattice import _costs, _shape

EXPECTED = Path(__file__).parent / "kaldi_expected"
ID2WORD = {int(i): w for w, i in (line.split() for line in
                                   (EXPECTED / "words.txt").read_text().splitlines())}


def _inputs(root: Path, scores: dict[str, np.ndarray]) -> tuple[Path, Path]:
    """A data dir of the utterances and asrdist-compute-loglikes' dir holding ``scores``."""
    data, kept = root / "data", root / "loglikes"
    data.mkdir(parents=True)
    kept.mkdir()
    kaldiio.save_ark(str(kept / "loglikes.ark"), scores, scp=str(kept / "loglikes.scp"))
    (kept / "num_pdfs").write_text("37\n")
    (data / "feats.scp").write_text("".join(f"{u} {kept / 'loglikes.ark'}:0\n" for u in scores))
    (data / "utt2spk").write_text("".join(f"{u} {u}\n" for u in scores))
    return data, kept / "loglikes.scp"


def _decode(root: Path, out: Path, scores: dict[str, np.ndarray] | None = None, nj: int = 1):
    data, scp = _inputs(root, scores or dict(kaldiio.load_ark(str(EXPECTED / "loglikes.ark"))))
    return decode_data_dir(EXPECTED, data, out, trans_mdl=str(EXPECTED / "final.mdl"),
                           loglikes=str(scp), nj=nj)


@pytest.fixture(scope="module")
def decoded(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("kaldi_inputs")
    summary = _decode(root, root / "decode")
    assert (summary.decoded, summary.failed, summary.partial) == (4, 0, 0)
    return root / "decode"


def _by_point(lines: list[str]) -> dict[str, list[str]]:
    """Kaldi's ``LMWT WIP rest...`` lines, grouped as our score_LMWT_WIP dirs, ids as words."""
    out: dict[str, list[str]] = {}
    for line in lines:
        lmwt, wip, *rest = line.split()
        out.setdefault(f"score_{lmwt}_{wip}", []).append(rest)
    return out


def test_the_decode_dir_holds_latgen_faster_mappeds_lattices(decoded):
    assert (decoded / "num_jobs").read_text() == "1\n"
    ours = dict(iter_lattices_binary(gzip.decompress((decoded / "lat.1.gz").read_bytes())))
    kaldi = dict(iter_lattices_binary((EXPECTED / "lat.1.bin").read_bytes()))
    assert sorted(ours) == sorted(kaldi)  # ours in the data dir's order, Kaldi's in the ark's
    for key in kaldi:
        assert _shape(ours[key]) == _shape(kaldi[key])
        np.testing.assert_allclose(_costs(ours[key]), _costs(kaldi[key]), rtol=2e-7, atol=0)


def test_the_sweep_texts_are_kaldis_at_all_39_points(decoded):
    expected = _by_point((EXPECTED / "sweep.txt").read_text().splitlines())
    assert len(expected) == 39
    assert sorted(p.name for p in decoded.glob("score_*")) == sorted(expected)
    for point, rows in expected.items():
        want = "".join(f"{utt} {' '.join(ID2WORD[int(w)] for w in ids)}".rstrip() + "\n"
                       for utt, *ids in sorted(rows))
        assert (decoded / point / "text").read_text() == want, point


def test_the_sweep_ctms_have_kaldis_word_times(decoded):
    expected = _by_point((EXPECTED / "sweep_ctm.txt").read_text().splitlines())
    for point, rows in expected.items():
        want = sorted(([*row[:4], ID2WORD[int(row[4])]] for row in rows),
                      key=lambda row: (row[0], float(row[2])))  # ours: by utterance, start
        got = [line.split() for line in (decoded / point / "ctm").read_text().splitlines()]
        assert got == want, point


def test_the_main_text_and_ctm_are_the_lmwt_1_over_acwt_reading(decoded):
    for name in ("text", "ctm"):
        assert (decoded / name).read_bytes() == (decoded / "score_10_0.0" / name).read_bytes()


def test_jobs_split_the_lattices_not_the_texts(decoded, tmp_path):
    out = tmp_path / "decode"
    _decode(tmp_path / "two", out, nj=2)
    assert (out / "num_jobs").read_text() == "2\n"
    keys = [sorted(dict(iter_lattices_binary(gzip.decompress((out / f"lat.{n}.gz").read_bytes()))))
            for n in (1, 2)]
    assert keys == [["noise1", "utt2"], ["utt1", "utt3"]]  # dealt round robin
    for point in [p.name for p in decoded.glob("score_*")]:
        assert (out / point / "text").read_bytes() == (decoded / point / "text").read_bytes()
    (out / ".decode.done").unlink()
    _decode(tmp_path / "one", out, nj=1)  # a rerun with fewer jobs leaves no lat.2.gz behind
    assert sorted(p.name for p in out.glob("lat.*")) == ["lat.1.gz"]
    assert (out / "lat.1.gz").read_bytes() == (decoded / "lat.1.gz").read_bytes()


@pytest.mark.parametrize("bad, message", [
    (lambda m: m[:, :30], "gives scores of shape (40, 30), not frames x 37 pdfs"),
    (lambda m: np.where(np.arange(37) == 3, np.nan, m), "gives scores that hold NaN or inf"),
    (lambda m: m[:0], "gives scores of shape (0, 37), not frames x 37 pdfs"),
])
def test_bad_scores_are_one_line_naming_the_utterance_and_file(tmp_path, bad, message):
    scores = dict(kaldiio.load_ark(str(EXPECTED / "loglikes.ark")))
    scores["noise1"] = np.ascontiguousarray(bad(scores["noise1"]), dtype=np.float32)
    with pytest.raises(AsrdistError) as err:
        _decode(tmp_path, tmp_path / "decode", scores)
    assert str(err.value) == (f"decode job 1/1: utterance noise1: "
                              f"{tmp_path / 'loglikes' / 'loglikes.scp'} {message}")
    assert not (tmp_path / "decode" / "text").exists()
    assert not list((tmp_path / "decode").glob("lat.*"))


def test_a_rerun_with_another_max_active_decodes_again(tmp_path):
    """Every lattice option is part of the stage's identity: --max-active (which the search
    honours) changed is not skipped as done; the same options are."""
    data, scp = _inputs(tmp_path, dict(kaldiio.load_ark(str(EXPECTED / "loglikes.ark"))))

    def decode(opts: LatticeOptions):
        return decode_data_dir(EXPECTED, data, tmp_path / "decode", opts=opts,
                               trans_mdl=str(EXPECTED / "final.mdl"), loglikes=str(scp))

    decode(LatticeOptions())
    assert isinstance(decode(LatticeOptions()), Skipped)
    again = decode(LatticeOptions(max_active=500))
    assert not isinstance(again, Skipped) and again.decoded == 4
    with pytest.raises(AsrdistError, match="--min-active 200 is above --max-active 50"):
        LatticeOptions(max_active=50)  # refused up front, not in the decode job
