"""Alignment dirs: every ali file of num_jobs is read, or the missing one is named."""

from __future__ import annotations

import numpy as np
import pytest

from asrdist.errors import AsrdistError
from asrdist.hmm.ali_dir import read_ali_dir
from asrdist.kaldi.alignments import write_alignments


def test_a_missing_alignment_file_of_num_jobs_is_named(tmp_path):
    ali = tmp_path / "mono"
    ali.mkdir()
    (ali / "num_jobs").write_text("2\n")
    write_alignments(ali / "ali.1.gz", [("u1", np.array([1, 2, 2], dtype=np.int32))])
    with pytest.raises(AsrdistError, match=r"missing alignment files: ali\.2\.gz"):
        read_ali_dir(ali)
    write_alignments(ali / "ali.2.gz", [("u2", np.array([3], dtype=np.int32))])
    assert sorted(read_ali_dir(ali)) == ["u1", "u2"]
