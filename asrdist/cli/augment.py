"""asrdist-augment: speed-perturbed, reverberated and noisy copies of a data dir (Kaldi's
perturb_data_dir_speed_3way.sh, reverberate_data_dir.py and augment_data_dir.py in one)."""

from __future__ import annotations

from pathlib import Path

import click

from asrdist.cli import command, number_list
from asrdist.corpus.augment import AugmentOptions, augment_data_dir
from asrdist.stage import Skipped


def _range(text: str, option: str) -> tuple[float, float]:
    values = number_list(text, option)
    if len(values) != 2:
        raise click.BadParameter(f"{text!r}: give LOW,HIGH", param_hint=option)
    return values[0], values[1]


@command()
@click.argument("src", type=click.Path(file_okay=False, path_type=Path))
@click.argument("out", type=click.Path(file_okay=False, path_type=Path))
@click.option("--speeds", default="0.9,1.1", show_default=True,
              help="Speed factors besides 1.0 (ids sp0.9-<utt>); empty: none.")
@click.option("--reverb-fraction", default=0.5, show_default=True,
              help="Fraction of the utterances given a reverberated copy (rev1-<utt>).")
@click.option("--noise-fraction", default=0.5, show_default=True,
              help="Fraction of the utterances given a noisy copy (noise1-<utt>).")
@click.option("--snr", default="5,20", show_default=True, help="SNR range of the noise, dB.")
@click.option("--rt60", default="0.2,0.7", show_default=True,
              help="Reverberation time range of the synthetic rooms, seconds.")
@click.option("--seed", default=0, show_default=True)
@click.option("--wav-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Where the copies' wavs go [default: OUT/../wav/<OUT name>].")
def main(src: Path, out: Path, speeds: str, reverb_fraction: float, noise_fraction: float,
         snr: str, rt60: str, seed: int, wav_dir: Path | None) -> None:
    """Write OUT: the utterances of SRC (a wav data dir) and their augmented copies, as real
    wav files, with utt2uniq naming each copy's clean utterance. Skips a finished OUT."""
    options = AugmentOptions(speeds=number_list(speeds, "--speeds"),
                             reverb_fraction=reverb_fraction, noise_fraction=noise_fraction,
                             snr_db=_range(snr, "--snr"), rt60=_range(rt60, "--rt60"), seed=seed)
    summary = augment_data_dir(src, out, options, wav_dir)
    if isinstance(summary, Skipped):  # done already: asrdist.stage logged the skip line
        return
    kinds = ", ".join(f"{n} {kind}" for kind, n in summary.copies.items())
    click.echo(f"{out}: {summary.clean_utts} clean utterances ({summary.clean_hours:.3f} h) "
               f"+ copies ({kinds}) = {summary.hours:.3f} h, {summary.seconds:.1f} s")


if __name__ == "__main__":
    main()
