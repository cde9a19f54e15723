"""asrdist-features: stage 1, fbank or MFCC features + per-speaker CMVN stats, Kaldi layout."""

from __future__ import annotations

from pathlib import Path

import click

from asrdist.cli import command
from asrdist.data.features import KINDS, FeatureOptions, feature_summary, make_features
from asrdist.jobs.cmd import Cmd, cmd_option


@command()
@click.option("--kind", type=click.Choice(KINDS), default="fbank", show_default=True)
@click.option("--nj", default=1, show_default=True, type=int,
              help="Parallel jobs; a file's utterances stay in one.")
@cmd_option
@click.option("--num-mel-bins", default=None, type=int,
              help="Mel bins [default: 40 for fbank, 23 for mfcc].")
@click.option("--num-ceps", default=13, show_default=True, type=int, help="MFCC cepstra.")
@click.option("--sample-rate", default=16000, show_default=True, type=int)
@click.option("--high-freq", default=None, type=float,
              help="Upper edge of the mel bins in Hz, <= 0: below the Nyquist frequency "
                   "(Kaldi's default 0) [default: lhotse's -400].")
@click.argument("src", type=click.Path(file_okay=False))
@click.argument("dest", type=click.Path(file_okay=False))
def main(kind: str, nj: int, cmd: Cmd, num_mel_bins: int | None, num_ceps: int, sample_rate: int,
         high_freq: float | None, src: str, dest: str) -> None:
    """Compute Kaldi-compatible features (snip_edges, 10 ms shift) for the Kaldi data dir SRC
    into DEST: feats.scp + DEST/data/*.ark, cmvn.scp, utt2num_frames, frame_shift,
    feats_config.json (what made the vectors: decoding checks a model against it) and copies
    of SRC's tables. Skips the work when DEST is done with the same options and SRC tables
    (--nj and --cmd aside); redoes it when they changed.

    SRC's wav.scp may hold files or Kaldi's pipes: sph2pipe ones (with perturb_data_dir_speed.sh's
    sox stages) are read in-process when sph2pipe or sox is not installed, asrdist-sph2wav ones
    always, each SPHERE file decoded once for both sides and every speed; other pipes run in the
    shell."""
    options = FeatureOptions(kind=kind, num_mel_bins=num_mel_bins, num_ceps=num_ceps,
                             sample_rate=sample_rate, high_freq=high_freq)
    # logs the skip line when done already
    make_features(src, dest, options, nj=nj, runner=cmd.make(Path(dest) / "log"))
    click.echo(feature_summary(dest))


if __name__ == "__main__":
    main()
