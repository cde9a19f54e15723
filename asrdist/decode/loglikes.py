"""Keeping the network's pseudo log-likelihoods so that a decoding sweep never re-runs it.

Kaldi keeps lattices and rescores them per LM weight; a lattice-free Viterbi decoder has no
lattice, so what is kept is the acoustic side: ``log p(pdf | x) - log p(pdf)`` per frame, in a
Kaldi ark/scp (what ``nnet3-compute`` writes). ``asrdist-decode --loglikes SCP`` then searches
HCLG with any LM weight and insertion penalty from those, the network untouched.
"""

from __future__ import annotations

import errno
import logging
import os
from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path

import kaldiio
import numpy as np

from asrdist.decode.acoustic import AS_TRAINED, Chunking, NnetScorer, list_utterances
from asrdist.errors import AsrdistError
from asrdist.fsutil import atomic_path, write_atomically
from asrdist.stage import Skipped, check_done

STAGE = "loglikes"
OUTPUTS = ("loglikes.ark", "loglikes.scp", "num_pdfs")
log = logging.getLogger(__name__)


def compute_loglikes(final_pt: str | os.PathLike, data_dir: str | os.PathLike,
                     out_dir: str | os.PathLike, chunking: Chunking = AS_TRAINED) -> Path | Skipped:
    """Write ``OUT/loglikes.{ark,scp}`` and ``OUT/num_pdfs``; Skipped when done already."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    remove_temp_files(out)
    check = check_done(out, STAGE, asdict(chunking), [final_pt, data_dir])
    if check.done:
        return check.skipped()
    scorer = NnetScorer(final_pt, data_dir, chunking)
    utts = list_utterances(data_dir)
    ark = (out / "loglikes.ark").resolve()
    try:
        with atomic_path(ark) as tmp_ark, atomic_path(out / "loglikes.scp") as tmp_scp:
            with kaldiio.WriteHelper(f"ark,scp:{tmp_ark},{tmp_scp}") as writer:
                for utt, scores in scorer.scores(utts):
                    writer(utt, scores)
            # the scp names the temporary ark; point it at the final name
            tmp_scp.write_text(tmp_scp.read_text().replace(str(tmp_ark), str(ark)))
    except OSError as e:
        if e.errno not in (errno.ENOSPC, errno.EDQUOT):  # a full disk or quota
            raise
        raise AsrdistError(f"{ark}: cannot write the scores: {e.strerror}") from e
    write_atomically(out / "num_pdfs", lambda f: f.write(f"{scorer.num_pdfs}\n".encode()),
                     "pdf count")
    check.mark_done(["loglikes.scp"])
    return out


def remove_temp_files(out: Path) -> None:
    """Remove the hidden temporary files (``.loglikes.ark.*.tmp``: as large as the scores) that
    a killed run left in ``out``, as the trainer does for checkpoints; only called before this
    run writes anything there."""
    for name in OUTPUTS:
        for path in out.glob(f".{name}.*.tmp"):
            log.info("%s: removing the temporary file a killed run left", path)
            path.unlink(missing_ok=True)


class LoglikeScorer:
    """Saved scores, served as the decoder's acoustic scorer."""

    def __init__(self, scp: str | os.PathLike):
        self.path = Path(scp)
        if not self.path.is_file():
            raise AsrdistError(f"--loglikes {scp}: no such file (run asrdist-compute-loglikes)")
        self.table = kaldiio.load_scp(str(scp))
        num_pdfs = self.path.parent / "num_pdfs"
        if not num_pdfs.is_file():
            raise AsrdistError(f"{num_pdfs}: missing beside --loglikes {scp}")
        self.num_pdfs = int(num_pdfs.read_text().split()[0])

    def scores(self, utts: list[str]) -> Iterator[tuple[str, np.ndarray]]:
        for utt in utts:
            if utt not in self.table:
                raise AsrdistError(f"--loglikes {self.path}: no scores for utterance {utt}")
            yield utt, np.asarray(self.table[utt], dtype=np.float32)
