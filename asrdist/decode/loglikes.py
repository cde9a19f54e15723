"""Keeping the network's pseudo log-likelihoods so that a decoding sweep never re-runs it.

Kaldi keeps lattices and rescores them per LM weight; a lattice-free Viterbi decoder has no
lattice, so what is kept is the acoustic side: ``log p(pdf | x) - log p(pdf)`` per frame, in a
Kaldi ark/scp (what ``nnet3-compute`` writes). ``asrdist-decode --loglikes SCP`` then searches
HCLG with any LM weight and insertion penalty from those, the network untouched.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path

import kaldiio
import numpy as np

from asrdist.decode.acoustic import AS_TRAINED, Chunking, NnetScorer, list_utterances
from asrdist.errors import AsrdistError
from asrdist.fsutil import atomic_path
from asrdist.stage import Skipped, check_done

STAGE = "loglikes"


def compute_loglikes(final_pt: str | os.PathLike, data_dir: str | os.PathLike,
                     out_dir: str | os.PathLike, chunking: Chunking = AS_TRAINED) -> Path | Skipped:
    """Write ``OUT/loglikes.{ark,scp}`` and ``OUT/num_pdfs``; Skipped when done already."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    check = check_done(out, STAGE, asdict(chunking), [final_pt, data_dir])
    if check.done:
        return check.skipped()
    scorer = NnetScorer(final_pt, data_dir, chunking)
    utts = list_utterances(data_dir)
    ark = (out / "loglikes.ark").resolve()
    with atomic_path(ark) as tmp_ark, atomic_path(out / "loglikes.scp") as tmp_scp:
        with kaldiio.WriteHelper(f"ark,scp:{tmp_ark},{tmp_scp}") as writer:
            for utt, scores in scorer.scores(utts):
                writer(utt, scores)
        # the scp names the temporary ark; point it at the final name
        tmp_scp.write_text(tmp_scp.read_text().replace(str(tmp_ark), str(ark)))
    (out / "num_pdfs").write_text(f"{scorer.num_pdfs}\n")
    check.mark_done(["loglikes.scp"])
    return out


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
