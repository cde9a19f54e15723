"""Write the inputs of the build-tree comparison (treeacc.txt, roots.int, questions.int, topo):
Gaussian statistics of every triphone context of 5 phones and a context-independent silence,
each context's mean moved by effects of its neighbours, so that the tree has real choices.

    python tests/gmm/kaldi_tree/make_inputs.py   # then make_expected.sh runs Kaldi on them
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from asrdist.kaldi.topology import make_topo

HERE = Path(__file__).parent
DIM, SIL, PHONES = 3, 1, [2, 3, 4, 5, 6]


def main() -> None:
    rng = np.random.default_rng(7)
    base = {(c, s): rng.normal(0, 3, DIM) for c in [SIL, *PHONES] for s in range(5)}
    left, right = (rng.normal(0, 1.5, (8, DIM)) for _ in range(2))
    events = []
    for s in range(5):  # silence: context-independent, its centre only
        events.append(([(-1, s), (1, SIL)], base[SIL, s], 400.0))
    for c in PHONES:
        for s in range(3):
            for lft in [0, SIL, *PHONES]:
                for rgt in [0, SIL, *PHONES]:
                    mean = base[c, s] + (left[lft] if s == 0 else 0) + (right[rgt] if s == 2
                                                                         else 0)
                    mean = mean + rng.normal(0, 0.2, DIM)
                    events.append(([(-1, s), (0, lft), (1, c), (2, rgt)], mean,
                                   float(rng.integers(5, 60))))
    lines = [f"BTS {len(events)}"]
    for ev, mean, count in events:
        var = rng.uniform(0.5, 1.5, DIM)
        x, x2 = count * mean, count * (var + mean * mean)
        lines.append(f"EV {len(ev)} " + " ".join(f"{k} {v}" for k, v in ev))
        lines.append(f"T GCL {count} 0.01 [\n  {' '.join(map(repr, x.tolist()))}\n"
                     f"  {' '.join(map(repr, x2.tolist()))} ]")
    (HERE / "treeacc.txt").write_text("\n".join(lines) + "\n")
    (HERE / "roots.int").write_text("".join(f"shared split {p}\n" for p in [SIL, *PHONES]))
    (HERE / "questions.int").write_text("1\n2 3\n4 5 6\n2 3 4\n5 6\n2\n3\n4\n5\n6\n1 2 3\n")
    (HERE / "topo").write_text(make_topo(PHONES, [SIL]))


if __name__ == "__main__":
    main()
