"""asrdist-join-feats: paste extra per-frame streams (fMLLR, online i-vectors) onto features."""

from __future__ import annotations

import click

from asrdist.cli import command
from asrdist.data.join import Stream, join_features


@command()
@click.argument("src", type=click.Path(file_okay=False))
@click.argument("dest", type=click.Path(file_okay=False))
@click.argument("streams", nargs=-1, required=True)
@click.option("--length-tolerance", default=2, show_default=True, type=int,
              help="Frames a stream may differ from the features (paste-feats).")
def main(src: str, dest: str, streams: tuple[str, ...], length_tolerance: int) -> None:
    """Write DEST: the features of SRC with each STREAM (an scp, 'x.scp:N' for one row every N
    frames, e.g. ivector_online.scp:10) joined per frame, with new cmvn.scp. E.g. the papers'
    260-dim input: 40 fbank (+deltas) SRC + fMLLR feats.scp + ivector_online.scp:10."""
    join_features(src, dest, [Stream.parse(s) for s in streams], length_tolerance)


if __name__ == "__main__":
    main()
