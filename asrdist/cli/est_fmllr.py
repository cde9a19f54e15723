"""asrdist-est-fmllr: the test speakers' fMLLR transforms from a decoding pass, for
asrdist-decode --fmllr with a speaker-adapted (SAT) system. From the SAT system's own lattices
the frames are weighted by their lattice posteriors (decode_fmllr.sh's second pass:
lattice-to-post | weight-silence-post | gmm-est-fmllr); another system's lattices give their
best paths, converted to the SAT system's tree (lattice-1best | convert-ali)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path

import click
import numpy as np

from asrdist.cli import command
from asrdist.decode.lattice import CompactLattice, best_path
from asrdist.decode.lattice_post import lattice_posteriors
from asrdist.decode.lmrescore import iter_lattice_archive
from asrdist.errors import AsrdistError
from asrdist.gmm.adapt import FmllrOptions, SoftAlignment, adapt_data_dir, silence_phones
from asrdist.kaldi.gmm_feats import read_speaker_transforms, write_speaker_transforms
from asrdist.kaldi.transition_model import read_transition_model


def _lattices(lattice_dir: Path) -> Iterator[tuple[str, CompactLattice]]:
    files = sorted(lattice_dir.glob("lat.*.gz"))
    if not files:
        raise AsrdistError(f"{lattice_dir}: no lat.*.gz (decode it first)")
    for f in files:
        yield from iter_lattice_archive(f)


def _best_paths(lattice_dir: Path, lmwt: float, wip: float) -> dict[str, np.ndarray]:
    """Each lattice's best path's transition-ids (lattice-1best | lattice-to-ali)."""
    return {utt: np.asarray(best_path(clat, lmwt, wip).alignment, dtype=np.int64)
            for utt, clat in _lattices(lattice_dir)}


def _posteriors(lattice_dir: Path, lmwt: float) -> dict[str, SoftAlignment]:
    """Each lattice's transition-id posteriors at acoustic scale 1 / lmwt (lattice-to-post)."""
    out = {}
    for utt, clat in _lattices(lattice_dir):
        try:
            out[utt] = SoftAlignment.of_posterior(lattice_posteriors(clat, 1.0 / lmwt)[0])
        except AsrdistError as e:
            raise AsrdistError(f"{lattice_dir}: utterance {utt}: {e}") from None
    return out


@command()
@click.argument("lang_dir", type=click.Path(file_okay=False, path_type=Path))
@click.argument("model_dir", type=click.Path(file_okay=False, path_type=Path))
@click.argument("data_dir", type=click.Path(file_okay=False, path_type=Path))
@click.argument("lattice_dir", type=click.Path(file_okay=False, path_type=Path))
@click.argument("out", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--lattice-mdl", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="The model the lattices were decoded with (default MODEL_DIR/final.mdl); "
                   "another system's alignments are converted to MODEL_DIR's tree.")
@click.option("--previous", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Transforms the lattices' features were adapted with: estimated on top of "
                   "them and composed (the second pass).")
@click.option("--lmwt", default=10.0, show_default=True,
              help="LM weight of the best path read off each lattice.")
@click.option("--wip", default=0.0, show_default=True, help="Its word insertion penalty.")
@click.option("--silence-weight", default=0.01, show_default=True,
              help="Weight of silence frames (decode_fmllr.sh's 0.01).")
@click.option("--best-path", "use_best_path", is_flag=True,
              help="Best paths even from the SAT system's own lattices (not their posteriors).")
def main(lang_dir: Path, model_dir: Path, data_dir: Path, lattice_dir: Path, out: Path,
         lattice_mdl: Path | None, previous: Path | None, lmwt: float, wip: float,
         silence_weight: float, use_best_path: bool) -> None:
    """Estimate each speaker of DATA_DIR an fMLLR transform against MODEL_DIR's SAT system
    from LATTICE_DIR's lattices (a decode of DATA_DIR) and write them to OUT (a Kaldi archive
    of matrices by speaker)."""
    aligned_with = read_transition_model(lattice_mdl or model_dir / "final.mdl")
    own = aligned_with.tuples == read_transition_model(model_dir / "final.mdl").tuples
    alignments: Mapping[str, np.ndarray | SoftAlignment] = (
        _posteriors(lattice_dir, lmwt) if own and not use_best_path
        else _best_paths(lattice_dir, lmwt, wip))
    opts = FmllrOptions(silence_weight, silence_phones(lang_dir))
    before = read_speaker_transforms(previous) if previous else None
    transforms = adapt_data_dir(model_dir, data_dir, alignments, aligned_with, opts,
                                before)
    write_speaker_transforms(out, transforms)
    kind = "lattices' posteriors" if own and not use_best_path else "best paths"
    click.echo(f"{out}: {len(transforms)} speakers' transforms from {len(alignments)} "
               f"{kind}", err=True)
