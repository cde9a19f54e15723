"""asrdist-ingest-ali: Kaldi alignment dir -> per-frame pdf-id targets (recipe stage 3)."""

from __future__ import annotations

from pathlib import Path

import click

from asrdist.cli import command
from asrdist.data.ingest import TOLERANCE, IngestReport, ingest_alignments
from asrdist.stage import Skipped


@command()
@click.option(
    "--tolerance",
    default=TOLERANCE,
    show_default=True,
    type=click.IntRange(min=0),
    help="Largest |alignment - feature| length difference fixed by padding/truncating.",
)
@click.option(
    "--max-missing",
    default=0.05,
    show_default=True,
    type=click.FloatRange(0.0, 1.0),
    help="Largest share of feature utterances allowed to have no alignment.",
)
@click.argument("ali_dir", type=click.Path(file_okay=False, path_type=str))
@click.argument("feats_scp", type=click.Path(dir_okay=False, path_type=str))
@click.argument("out_dir", type=click.Path(file_okay=False, path_type=str))
def main(tolerance: int, max_missing: float, ali_dir: str, feats_scp: str, out_dir: str) -> None:
    """Map ALI_DIR's transition-ids to pdf-ids for the utterances of FEATS_SCP into OUT_DIR.

    Writes OUT_DIR/pdf.ark + pdf.scp (int32 vectors, one pdf-id per feature frame), num_pdfs,
    pdf_counts and report.txt; prints the report. One streamed pass: memory does not grow with
    the corpus; disk takes pdf.ark (5 bytes a frame) and, while it runs, a scratch index in
    OUT_DIR (about 150 bytes an utterance). A rerun skips an OUT_DIR done with the same
    options and inputs (FEATS_SCP; ALI_DIR's num_jobs, ali.*.gz, final.mdl) and redoes it
    otherwise.
    """
    report = ingest_alignments(ali_dir, feats_scp, out_dir, tolerance, max_missing)
    if isinstance(report, Skipped):  # done already: the skip line is logged; show its report
        report = IngestReport.load(Path(out_dir))
    click.echo(report.to_text(), nl=False)


if __name__ == "__main__":
    main()
