"""asrdist-sph2wav: sph2pipe's job for wav.scp pipes, shorten-compressed SPHERE included."""

from __future__ import annotations

import logging
import sys

import click

from asrdist.cli import command
from asrdist.kaldi.sphere import FALLBACK_WARNING, channel_wav, native_decoder


@command()
@click.argument("sph", type=click.Path(dir_okay=False))
@click.option("-c", "--channel", default=1, show_default=True, type=int,
              help="Channel to extract (1 = A side, 2 = B side), as sph2pipe -c.")
@click.option("--speed", default=1.0, show_default=True, type=float,
              help="Speed perturbation factor (sox 'speed'), e.g. 0.9 or 1.1.")
def main(sph: str, channel: int, speed: float) -> None:
    """Write one channel of SPH as a 16-bit wav to stdout (wav.scp: 'asrdist-sph2wav -c 1 X |')."""
    if not native_decoder():
        logging.getLogger(__name__).warning("%s", FALLBACK_WARNING)
    sys.stdout.buffer.write(channel_wav(sph, channel, speed))


if __name__ == "__main__":
    main()
