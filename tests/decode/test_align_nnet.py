"""Alignment with a network (steps/nnet3/align.sh): the path its pdf scores spell, in a dir
ingestion reads."""

from __future__ import annotations

from pathlib import Path

import kaldi_hmm_gmm  # noqa: F401  (before anything that loads kaldifst)
import kaldiio
import numpy as np
import pytest

from asrdist.data.ingest import ingest_alignments
from asrdist.decode.align_nnet import align_nnet
from asrdist.errors import AsrdistError
from asrdist.kaldi.alignments import read_alignments
from asrdist.stage import Skipped
from asrdist.testing.tiny_system import (
    TinySystem,
    write_identity_nnet,
    write_test_data,
)

SENTENCES = {"a-1": "cat sat", "a-2": "dog sit on cat", "b-1": "dog sat on dog"}


@pytest.fixture(scope="module")
def system(tiny_system: TinySystem, tmp_path_factory) -> tuple[TinySystem, Path, Path]:
    root = tmp_path_factory.mktemp("nnet_ali")
    write_test_data(tiny_system, root / "data", SENTENCES, "nnet")
    write_identity_nnet(tiny_system, root / "final.pt")
    return tiny_system, root / "data", root / "final.pt"


def test_the_alignment_follows_the_networks_pdfs_and_ingests(system, tmp_path):
    tiny, data, model = system
    out = tmp_path / "ali"
    summary = align_nnet(data, tiny.lang, model, tiny.mono, out, nj=2)
    assert summary is not None and summary.failed == [] and summary.aligned == 3
    assert (out / "num_jobs").read_text() == "2\n"
    alis = {u: a for n in (1, 2) for u, a in read_alignments(out / f"ali.{n}.gz")}
    assert sorted(alis) == sorted(SENTENCES)
    for utt, sentence in SENTENCES.items():
        np.testing.assert_array_equal(tiny.trans.tid_to_pdf[alis[utt]],
                                      tiny.pdf_frames(sentence))
    report = ingest_alignments(out, data / "feats.scp", tmp_path / "pdf")
    assert report is not None
    targets = dict(kaldiio.load_scp(str(tmp_path / "pdf" / "pdf.scp")))
    np.testing.assert_array_equal(targets["a-1"], tiny.pdf_frames("cat sat"))
    assert isinstance(align_nnet(data, tiny.lang, model, tiny.mono, out, nj=2), Skipped)


def test_a_network_with_other_outputs_is_refused(system, tmp_path):
    tiny, data, _ = system
    other = tmp_path / "other.pt"
    write_identity_nnet(tiny, other, num_pdfs=tiny.trans.num_pdfs + 1)
    with pytest.raises(AsrdistError, match=r"has \d+ outputs but .*final.mdl has \d+ pdfs"):
        align_nnet(data, tiny.lang, other, tiny.mono, tmp_path / "ali")
    assert not (tmp_path / "ali" / "final.mdl").exists()
