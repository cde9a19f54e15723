"""asrdist-lattice-post: the per-frame transition-id posteriors of a lattice dir, as Kaldi's
``lattice-to-post --acoustic-scale=kappa`` writes them (a text Posterior archive), or with
``--smbr`` sMBR's signed posteriors as ``lattice-to-smbr-post`` writes them, so any lattice
dir's occupancies can be compared with Kaldi's and read by its tools."""

from __future__ import annotations

from pathlib import Path

import click
import numpy as np

from asrdist.cli import command
from asrdist.decode.lattice_post import (
    SmbrReference,
    lattice_posteriors,
    posterior_text,
    smbr_posteriors,
)
from asrdist.decode.lmrescore import iter_lattice_archive
from asrdist.errors import AsrdistError
from asrdist.fsutil import atomic_write
from asrdist.kaldi.alignments import alignment_files, read_alignments
from asrdist.kaldi.transition_model import TransitionInfo, read_transition_model


def _silence_phones(text: str) -> frozenset[int]:
    """Kaldi's colon-separated integer list (``1:2:3``)."""
    try:
        return frozenset(int(p) for p in text.split(":") if p)
    except ValueError:
        raise AsrdistError(f"--silence-phones: expected integers joined by ':', got {text!r}"
                           ) from None


def _alignments(ali_dir: Path) -> dict[str, np.ndarray]:
    return {utt: ali for f in alignment_files(ali_dir) for utt, ali in read_alignments(f)}


@command()
@click.argument("lattice_dir", type=click.Path(file_okay=False, path_type=Path))
@click.argument("out", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--acoustic-scale", default=1.0, show_default=True,
              help="Scale of the acoustic costs (kappa) before the forward-backward.")
@click.option("--smbr", is_flag=True,
              help="sMBR's signed posteriors against --alignments (lattice-to-smbr-post).")
@click.option("--alignments", "ali_dir", type=click.Path(file_okay=False, path_type=Path),
              help="With --smbr: the numerator alignment dir (ali.N.gz, transition-ids).")
@click.option("--trans-mdl", type=click.Path(dir_okay=False, path_type=Path),
              help="With --smbr: the model whose transition-ids the lattices hold.")
@click.option("--silence-phones", default="", help="With --smbr: colon-separated phone ids.")
@click.option("--one-silence-class", is_flag=True,
              help="With --smbr: silence matches silence (Kaldi's newer behaviour).")
def main(lattice_dir: Path, out: Path, acoustic_scale: float, smbr: bool,
         ali_dir: Path | None, trans_mdl: Path | None, silence_phones: str,
         one_silence_class: bool) -> None:
    """Write the posteriors of every lattice in LATTICE_DIR (lat.*.gz) to OUT, sorted by
    utterance."""
    if acoustic_scale == 0.0:
        raise AsrdistError("--acoustic-scale: 0 cannot be inverted")
    if smbr and (ali_dir is None or trans_mdl is None):
        raise AsrdistError("--smbr needs --alignments and --trans-mdl")
    files = sorted(lattice_dir.glob("lat.*.gz"))
    if not files:
        raise AsrdistError(f"{lattice_dir}: no lat.*.gz")
    trans: TransitionInfo | None = read_transition_model(trans_mdl) if smbr else None
    alis = _alignments(ali_dir) if smbr else {}
    sil = _silence_phones(silence_phones)
    lines, score, frames, missing = {}, 0.0, 0, []
    for f in files:
        for utt, clat in iter_lattice_archive(f):
            try:
                if trans is None:
                    post, utt_score = lattice_posteriors(clat, acoustic_scale)
                elif utt not in alis:
                    missing.append(utt)
                    continue
                else:
                    ref = SmbrReference(alis[utt], trans.tid_to_pdf, trans.tid_to_phone, sil,
                                        one_silence_class)
                    post, utt_score = smbr_posteriors(clat, ref, acoustic_scale)
            except AsrdistError as e:
                raise AsrdistError(f"{f}: utterance {utt}: {e}") from None
            lines[utt] = posterior_text(utt, post)
            score, frames = score + utt_score, frames + len(post)
    if smbr and not lines:
        raise AsrdistError(f"{ali_dir}: no alignment for any lattice of {lattice_dir}")
    with atomic_write(out) as w:
        w.writelines(lines[u] for u in sorted(lines, key=str.encode))
    what = "average frame accuracy" if smbr else "average log-like per frame"
    click.echo(f"{out}: {len(lines)} lattices, {frames} frames, {what} "
               f"{score / max(frames, 1):.4f}", err=True)
    if missing:
        click.echo(f"warning: no alignment for {len(missing)} lattice(s), e.g. {missing[0]}",
                   err=True)
