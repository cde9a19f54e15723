"""Writes this folder's inputs as Kaldi files: the tiny system's HCLG.fst, final.mdl (its
transition model), words.txt, phones/align_lexicon.int (a graph dir, as utils/mkgraph.sh leaves
one), and loglikes.ark, pseudo log-likelihoods that spell a few
sentences with look-alike pdfs close behind, so the lattices hold competing words, and one of
pure noise (``noise1``), whose lattice is large and whose best path moves with the LM weight.

From the repository root:
``PYTHONPATH=. .venv/bin/python tests/decode/kaldi_expected/make_inputs.py``
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import kaldiio
import numpy as np

from asrdist.decode.graph import make_graph
from asrdist.testing.tiny_system import make_system

HERE = Path(__file__).parent
SENTENCES = {"utt1": "dog sat on cat", "utt2": "cat sit", "utt3": "dog sit on dog"}


def loglikes(pdfs: list[int], num_pdfs: int, rng: np.random.Generator) -> np.ndarray:
    """Every pdf far below; the frame's own pdf on top and one other pdf a little behind."""
    scores = rng.normal(-12.0, 2.0, size=(len(pdfs), num_pdfs))
    rows = np.arange(len(pdfs))
    rivals = rng.integers(0, num_pdfs, size=len(pdfs))
    scores[rows, rivals] = rng.normal(-4.0, 1.5, size=len(pdfs))
    scores[rows, pdfs] = rng.normal(-2.0, 1.5, size=len(pdfs))
    return scores.astype(np.float32)


def main() -> None:
    rng = np.random.default_rng(32)
    with tempfile.TemporaryDirectory() as tmp:
        system = make_system(Path(tmp) / "sys")
        graph = make_graph(system.lang, system.mono / "final.mdl", system.train_text,
                           Path(tmp) / "graph", order=3)
        for name in ("HCLG.fst", "final.mdl", "words.txt", "phones/align_lexicon.int"):
            (HERE / name).parent.mkdir(exist_ok=True)
            shutil.copy(graph / name, HERE / name)
        scores = {utt: loglikes(system.pdf_frames(text), system.trans.num_pdfs, rng)
                  for utt, text in sorted(SENTENCES.items())}
        scores["noise1"] = rng.normal(-8.0, 2.5, size=(40, system.trans.num_pdfs)).astype(
            np.float32)
        kaldiio.save_ark(str(HERE / "loglikes.ark"), scores)


if __name__ == "__main__":
    main()
