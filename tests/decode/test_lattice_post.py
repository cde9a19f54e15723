"""Lattice posteriors (lattice-to-post) on lattices small enough to compute by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest
from click.testing import CliRunner

from asrdist.cli.lattice_post import main
from asrdist.decode.lattice import CompactLattice
from asrdist.decode.lattice_io import write_lattices
from asrdist.decode.lattice_post import (
    SmbrReference,
    lattice_posteriors,
    pdf_posteriors,
    posterior_text,
    smbr_posteriors,
)
from asrdist.errors import AsrdistError

F = np.float32


def two_paths() -> CompactLattice:
    """0 -A-> 1 and 0 -B-> 1, then 1 -C-> 2 (final): A is (graph 1, acoustic 2) over tids
    5 6, B (0.5, 4) over 5 7, C (0, 1) over 8."""
    return CompactLattice(
        arcs=[[(1, (F(1.0), F(2.0)), (5, 6), 1), (2, (F(0.5), F(4.0)), (5, 7), 1)],
              [(3, (F(0.0), F(1.0)), (8,), 2)], []],
        final=[None, None, ((F(0.0), F(0.0)), ())], start=0)


def test_two_paths_by_hand():
    """With kappa 0.5 the paths cost 1 + 1 + 0.5 = 2.5 (A C) and 0.5 + 2 + 0.5 = 3 (B C):
    A's posterior is 1 / (1 + e^-0.5) = 0.622459, B's the rest; frames 0 and 2 are certain."""
    post, like = lattice_posteriors(two_paths(), kappa=0.5)
    a = 1.0 / (1.0 + math.exp(-0.5))
    assert len(post) == 3
    assert post[0] == [(5, pytest.approx(1.0))]
    assert post[1] == [(6, pytest.approx(a)), (7, pytest.approx(1.0 - a))]
    assert post[2] == [(8, pytest.approx(1.0))]
    assert like == pytest.approx(math.log(math.exp(-2.5) + math.exp(-3.0)))


def test_kappa_changes_who_wins_and_final_strings_count():
    """kappa 1: A C costs 1 + 2 + 1 = 4, B C 0.5 + 4 + 1 = 5.5; a final string's frames get
    the final state's posterior."""
    lat = two_paths()
    lat.final[2] = ((F(0.0), F(0.0)), (9, 9))
    post, _ = lattice_posteriors(lat, kappa=1.0)
    a = 1.0 / (1.0 + math.exp(-1.5))
    assert post[1] == [(6, pytest.approx(a)), (7, pytest.approx(1.0 - a))]
    assert post[3] == [(9, pytest.approx(1.0))] and post[4] == [(9, pytest.approx(1.0))]


def test_pdf_sums_and_kaldi_text():
    post, _ = lattice_posteriors(two_paths(), kappa=0.5)
    tid_to_pdf = np.array([-1, 0, 0, 0, 0, 3, 4, 4, 2])
    assert list(pdf_posteriors(post, tid_to_pdf))[1] == {4: pytest.approx(1.0)}
    # 1 / (1 + e^-0.5) = 0.62245933 stored as a float (0.62245935), seven digits as Kaldi prints
    assert posterior_text("u1", post) == "u1 [ 5 1 ] [ 6 0.6224594 7 0.3775407 ] [ 8 1 ] \n"


def test_a_state_reached_at_two_times_is_an_error():
    lat = CompactLattice(
        arcs=[[(1, (F(0), F(0)), (1,), 1), (1, (F(0), F(0)), (1, 1), 1)], []],
        final=[None, ((F(0), F(0)), ())], start=0)
    with pytest.raises(AsrdistError, match="state 1 is reached after 1 and 2 frames"):
        lattice_posteriors(lat)


def test_the_command_line_writes_a_kaldi_posterior_archive(tmp_path):
    write_lattices(tmp_path / "lat.1.gz", [("u2", two_paths()), ("u1", two_paths())])
    out = CliRunner().invoke(main, ["--acoustic-scale", "0.5", str(tmp_path),
                                    str(tmp_path / "post.ark")])
    assert out.exit_code == 0, out.output
    line = "[ 5 1 ] [ 6 0.6224594 7 0.3775407 ] [ 8 1 ] \n"
    assert (tmp_path / "post.ark").read_text() == f"u1 {line}u2 {line}"
    empty = CliRunner().invoke(main, [str(tmp_path / "none"), str(tmp_path / "x.ark")])
    assert empty.exit_code == 1 and "no lat.*.gz" in empty.output


def smbr_reference(**kw) -> SmbrReference:
    """Reference A C (tids 5 6 8); tid 7 (B's) has another pdf than 6; tid 8's phone is 2."""
    tid_to_pdf = np.array([-1, 0, 0, 0, 0, 3, 4, 5, 2])
    tid_to_phone = np.array([0, 1, 1, 1, 1, 1, 1, 1, 2])
    return SmbrReference(np.array([5, 6, 8]), tid_to_pdf, tid_to_phone, **kw)


def test_smbr_by_hand():
    """Frame accuracies: A C 3, B C 2 (frame 1 wrong); expected 3a + 2(1 - a) = 2 + a. The
    signed posteriors are a(1 - a) on A's tids and -a(1 - a) on B's; frames 0 and 2 sum to 0
    (C is on every path), so they hold nothing, as MergePairVectorSumming drops zeros."""
    a = 1.0 / (1.0 + math.exp(-0.5))
    post, expected = smbr_posteriors(two_paths(), smbr_reference(silence_phones=frozenset()),
                                     kappa=0.5)
    assert expected == pytest.approx(2 + a)
    assert post[0] == [] and post[2] == []
    assert post[1] == [(6, pytest.approx(a * (1 - a))), (7, pytest.approx(-a * (1 - a)))]


def test_smbr_silence_frames_count_only_with_one_silence_class():
    """Phone 2 (tid 8) silence: Kaldi's old rule never counts a silence frame as right
    (expected 1 + a), one_silence_class counts silence against silence (2 + a)."""
    a = 1.0 / (1.0 + math.exp(-0.5))
    _, old = smbr_posteriors(two_paths(), smbr_reference(silence_phones=frozenset({2})), 0.5)
    _, one = smbr_posteriors(two_paths(), smbr_reference(silence_phones=frozenset({2}),
                                                         one_silence_class=True), 0.5)
    assert old == pytest.approx(1 + a) and one == pytest.approx(2 + a)


def test_smbr_refuses_an_alignment_of_another_length_or_model():
    ref = smbr_reference(silence_phones=frozenset())
    short = SmbrReference(np.array([5, 6]), ref.tid_to_pdf, ref.tid_to_phone, frozenset())
    with pytest.raises(AsrdistError, match="3 frames, its alignment 2"):
        smbr_posteriors(two_paths(), short)
    small = SmbrReference(ref.alignment, ref.tid_to_pdf[:7], ref.tid_to_phone[:7], frozenset())
    with pytest.raises(AsrdistError, match="transition-id 8 is not in the model's 6"):
        smbr_posteriors(two_paths(), small)


def test_smbr_without_its_alignments_is_one_line(tmp_path):
    write_lattices(tmp_path / "lat.1.gz", [("u1", two_paths())])
    out = CliRunner().invoke(main, ["--smbr", str(tmp_path), str(tmp_path / "post.ark")])
    assert out.exit_code == 1 and out.output.strip() == \
        "Error: --smbr needs --alignments and --trans-mdl"
    assert not (tmp_path / "post.ark").exists()


def test_a_zero_acoustic_scale_is_one_line(tmp_path):
    write_lattices(tmp_path / "lat.1.gz", [("u1", two_paths())])
    out = CliRunner().invoke(main, ["--acoustic-scale", "0", str(tmp_path),
                                    str(tmp_path / "post.ark")])
    assert out.exit_code == 1
    assert out.output.strip() == "Error: --acoustic-scale: 0 cannot be inverted"
