"""``python -m asrdist.decode.latgen``: latgen-faster-mapped's job, with its arguments.

    python -m asrdist.decode.latgen [--acoustic-scale 0.1 --beam 15 --lattice-beam 8
        --max-active 7000 --min-active 200] final.mdl HCLG.fst LOGLIKES.ark lat.1.gz

Reads HCLG (vector or const), the transition model at the head of final.mdl and an archive of
frames x pdfs pseudo log-likelihoods, and writes the compact lattices as ``lat.N.gz`` (binary,
or Kaldi text with ``--text``). It is its own process because kaldi-decoder must be imported
before kaldilm (see :mod:`asrdist.decode.lattice`); it imports nothing that loads kaldilm.
An utterance that reaches no final state gets a partial lattice and a warning, as decode.sh's
``--allow-partial=true`` gives.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from pathlib import Path

from asrdist.decode.lattice import CompactLattice, LatticeDecoder, LatticeOptions
from asrdist.decode.lattice_io import write_lattices
from asrdist.errors import AsrdistError
from asrdist.kaldi.transition_model import read_transition_model


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m asrdist.decode.latgen", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    defaults = LatticeOptions()
    p.add_argument("--acoustic-scale", type=float, default=defaults.acwt)
    p.add_argument("--beam", type=float, default=defaults.beam)
    p.add_argument("--lattice-beam", type=float, default=defaults.lattice_beam)
    p.add_argument("--max-active", type=int, default=defaults.max_active)
    p.add_argument("--min-active", type=int, default=defaults.min_active)
    p.add_argument("--text", action="store_true", help="write Kaldi text, not binary")
    p.add_argument("model", type=Path)
    p.add_argument("hclg", type=Path)
    p.add_argument("loglikes", type=Path)
    p.add_argument("lattices", type=Path)
    args = p.parse_args(argv)
    try:
        import kaldiio

        decoder = LatticeDecoder(
            args.hclg, read_transition_model(args.model),
            LatticeOptions(args.acoustic_scale, args.beam, args.lattice_beam, args.max_active,
                           args.min_active))

        def lattices() -> Iterator[tuple[str, CompactLattice]]:
            for utt, scores in kaldiio.load_ark(str(args.loglikes)):
                clat = decoder.decode(scores)
                if not decoder.reached_final:
                    print(f"latgen: no final state reached for {utt}: its lattice ends in the "
                          "last frame's states (--allow-partial=true)", file=sys.stderr)
                yield utt, clat

        write_lattices(args.lattices, lattices(), binary=not args.text)
    except AsrdistError as e:
        print(f"latgen: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
