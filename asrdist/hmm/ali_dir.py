"""A Kaldi alignment dir as a whole: ali.1..N.gz beside num_jobs and the model they belong to.

Both aligners write one (asrdist.gmm.align_aug, asrdist.decode.align_nnet); ingestion and
realignment read one.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np

from asrdist.fsutil import atomic_path, atomic_write
from asrdist.jobs import split
from asrdist.kaldi.alignments import alignment_files, read_alignments, write_alignments

# Copied from the source alignment dir: what ingestion and decoding read beside the alignments.
MODEL_FILES = ("final.mdl", "tree", "phones.txt", "final.occs", "cmvn_opts", "delta_opts")


def alignment_inputs(ali_dir: Path) -> list[Path]:
    """What reading an alignment dir and its model depends on, for a stage's identity: not the
    whole dir, where graphs and decodes are written later (exp/mono/decode_test)."""
    names = ["final.mdl", "tree", "num_jobs"] + (["final.mat"] if (ali_dir / "final.mat").is_file()
                                                 else [])
    return [ali_dir / n for n in names] + sorted(ali_dir.glob("ali.*.gz"))


def read_ali_dir(ali_dir: Path) -> dict[str, np.ndarray]:
    """``ali.1.gz`` .. ``ali.N.gz`` (N from num_jobs, as ingestion reads them), utterance ->
    transition-ids; a missing file is an error, not a silently smaller set."""
    return {utt: ali for f in alignment_files(ali_dir) for utt, ali in read_alignments(f)}


def write_ali_dir(out_dir: Path, src_dir: Path, alis: list[tuple[str, np.ndarray]],
                  nj: int) -> None:
    """A Kaldi alignment dir: ali.1..N.gz, num_jobs, and ``src_dir``'s model files (the model
    the alignments belong to); final.mdl last."""
    out_dir.mkdir(parents=True, exist_ok=True)
    for old in out_dir.glob("ali.*.gz"):
        old.unlink()
    parts = split(alis, nj)
    for n, part in enumerate(parts, 1):
        write_alignments(out_dir / f"ali.{n}.gz", part)
    with atomic_write(out_dir / "num_jobs") as f:
        f.write(f"{len(parts)}\n")
    for name in sorted(MODEL_FILES, key=lambda n: n == "final.mdl"):
        if (src_dir / name).is_file():
            with atomic_path(out_dir / name) as tmp:
                shutil.copyfile(src_dir / name, tmp)
