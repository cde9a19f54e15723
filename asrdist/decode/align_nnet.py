"""Alignments from a trained network, as Kaldi's steps/nnet3/align.sh makes them: the targets of
the next network.

Each utterance's training graph (from the GMM dir's final.mdl and tree, whose pdfs are the
network's outputs) is Viterbi-aligned with the network's pseudo log-likelihoods (log posterior
minus log prior, as decoding uses them), the network scoring in the windows it was trained on.
The scales and beams are align.sh's, the GMM aligner's. The output is a Kaldi alignment dir
like the GMM's (ali.N.gz, num_jobs, final.mdl, tree), so asrdist-ingest-ali reads it unchanged.
An utterance the beams cannot align is left out, as Kaldi leaves it out.
"""

from __future__ import annotations

import logging
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import kaldi_hmm_gmm as khg  # noqa: F401  (before kaldifst, which asrdist.hmm loads)

from asrdist.decode.acoustic import NnetScorer
from asrdist.errors import AsrdistError
from asrdist.hmm.ali_dir import write_ali_dir
from asrdist.hmm.align import AlignOptions, matrix_decodable, viterbi_alignment
from asrdist.hmm.graphs import GraphCompiler
from asrdist.hmm.transitions import khg_transition_model
from asrdist.hmm.tree import read_tree
from asrdist.kaldi.data_dir import DataDir
from asrdist.kaldi.lang import Lang
from asrdist.kaldi.transition_model import read_transition_model
from asrdist.progress import track
from asrdist.stage import Skipped, check_done

log = logging.getLogger(__name__)

STAGE = "align_nnet"


@dataclass(frozen=True)
class NnetAlignSummary:
    aligned: int
    failed: list[str]
    frames: int
    seconds: float


def align_nnet(data_dir: Path, lang_dir: Path, model_pt: Path, gmm_dir: Path, out_dir: Path,
               nj: int = 2, opts: AlignOptions | None = None,
               map_oov: bool = False) -> NnetAlignSummary | Skipped:
    """Write ``out_dir``: every utterance of ``data_dir`` (the network's features, cmvn.scp,
    text) aligned with ``model_pt`` (an asrdist final.pt) through the graphs of ``gmm_dir``'s
    final.mdl and tree, in ``nj`` ali files. Skipped when done with the same inputs."""
    opts = opts or AlignOptions()
    data_dir, lang_dir, model_pt, gmm_dir, out_dir = map(
        Path, (data_dir, lang_dir, model_pt, gmm_dir, out_dir))
    if nj < 1:
        raise AsrdistError(f"--nj must be positive, got {nj}")
    model_files = [gmm_dir / "final.mdl", gmm_dir / "tree"]
    check = check_done(out_dir, STAGE, {**asdict(opts), "map_oov": map_oov},
                       [data_dir, lang_dir, model_pt, *model_files])
    if check.done:
        return check.skipped()
    start = time.time()
    data = DataDir.load(data_dir, ("text",))
    lang = Lang.load(lang_dir)
    transitions = read_transition_model(gmm_dir / "final.mdl")
    tree = read_tree(gmm_dir / "tree")
    trans_model = khg_transition_model(transitions, tree, gmm_dir / "final.mdl")
    scorer = NnetScorer(model_pt, data_dir)
    if scorer.num_pdfs != transitions.num_pdfs:
        raise AsrdistError(f"{model_pt} has {scorer.num_pdfs} outputs but "
                           f"{gmm_dir / 'final.mdl'} has {transitions.num_pdfs} pdfs: not its "
                           "targets")
    compiler = GraphCompiler(lang, tree, trans_model)
    alis, failed, frames = [], [], 0
    scores = scorer.scores(data.utts)
    for utt, loglikes in track(scores, "align", "utt", total=len(data.utts)):
        graph = compiler.compile(lang.word_ids(utt, data.text[utt], map_oov))
        decodable = matrix_decodable(loglikes, transitions.tid_to_pdf, opts)
        found = viterbi_alignment(graph, decodable, len(loglikes), trans_model, utt, opts)
        if found is None:
            failed.append(utt)
        else:
            alis.append((utt, found[0]))
            frames += len(loglikes)
    if not alis:
        raise AsrdistError(f"{data_dir}: no utterance could be aligned with {model_pt}")
    write_ali_dir(out_dir, gmm_dir, alis, nj)
    summary = NnetAlignSummary(len(alis), failed, frames, time.time() - start)
    log.info("%s: %d aligned, %d failed %s (%.1f s)", out_dir, len(alis), len(failed),
             " ".join(failed[:5]), summary.seconds)
    check.mark_done()
    return summary
