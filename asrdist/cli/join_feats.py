"""asrdist-join-feats: deltas, and extra per-frame streams (fMLLR, online i-vectors) pasted on."""

from __future__ import annotations

import click

from asrdist.cli import command
from asrdist.data.join import Stream, join_features
from asrdist.kaldi.layout import NORMS


@command()
@click.argument("src", type=click.Path(file_okay=False))
@click.argument("dest", type=click.Path(file_okay=False))
@click.argument("streams", nargs=-1)
@click.option("--delta-order", default=0, show_default=True, type=click.IntRange(min=0),
              help="Append deltas of SRC's features up to this order, as Kaldi's add-deltas "
                   "(window 2); 2: 40 fbank -> 120.")
@click.option("--src-norm", default="spk", show_default=True, type=click.Choice(NORMS),
              help="Normalisation of SRC's columns (and their deltas) in training and "
                   "decoding: CMVN per speaker, per utterance, or none.")
@click.option("--length-tolerance", default=2, show_default=True, type=int,
              help="Frames a stream may differ from the features (paste-feats).")
def main(src: str, dest: str, streams: tuple[str, ...], delta_order: int, src_norm: str,
         length_tolerance: int) -> None:
    """Write DEST: the features of SRC, with their deltas (--delta-order), and each STREAM (an
    scp; 'x.scp:N' for one row every N frames, e.g. ivector_online.scp:10; a suffix ':spk' or
    ':utt' to normalise it, none by default, as nnet3) joined per frame, with feats_layout
    (each range's columns and normalisation) and new cmvn.scp. The papers' 260-dim input:
    --delta-order 2 on 40 fbank SRC (120) + fMLLR feats.scp (40) + ivector_online.scp:10
    (100)."""
    join_features(src, dest, [Stream.parse(s) for s in streams], length_tolerance,
                  delta_order, src_norm)


if __name__ == "__main__":
    main()
