"""Writes the rescoring tests' old LM: ``tg.arpa``, the trigram that the committed HCLG.fst
was built from (asrdist's estimate on the tiny system's training text, as make_inputs.py's
make_graph made it), after checking that the graph built here is the committed one byte for
byte. The new LM, ``fg.arpa``, is written by hand and committed as it is.

From the repository root:
``PYTHONPATH=. .venv/bin/python tests/decode/kaldi_expected/make_lm_inputs.py``
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from asrdist.decode.graph import make_graph
from asrdist.testing.tiny_system import make_system

HERE = Path(__file__).parent


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        system = make_system(Path(tmp) / "sys")
        graph = make_graph(system.lang, system.mono / "final.mdl", system.train_text,
                           Path(tmp) / "graph", order=3)
        if (graph / "HCLG.fst").read_bytes() != (HERE / "HCLG.fst").read_bytes():
            raise SystemExit("the graph built now is not the committed HCLG.fst: rerun "
                             "make_inputs.py and make_expected.sh first")
        shutil.copy(graph / "lm.arpa", HERE / "tg.arpa")
        shutil.copy(system.lang / "oov.int", HERE / "oov.int")


if __name__ == "__main__":
    main()
