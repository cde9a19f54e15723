"""Alignment of one utterance against its training graph.

``equal_alignment`` is align-equal-compiled (a random path of exactly T frames: the flat start);
``viterbi_alignment`` is gmm-align-compiled (Viterbi beam search; the GMM's decodable is
asrdist.gmm.decodable's) or, with a network's pseudo log-likelihoods (``matrix_decodable``),
nnet3-align-compiled.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass

import kaldi_hmm_gmm as khg  # before kaldifst, or the process hangs
import kaldifst
import numpy as np


@dataclass(frozen=True)
class AlignOptions:
    """Viterbi alignment's options (gmm-align-compiled's, nnet3-align-compiled's) with
    train_mono.sh's scales and beams (regular_beam 10, retry_beam 40; its first pass uses
    initial_beam 6, MonoOptions.first_beam)."""

    beam: float = 10.0
    retry_beam: float = 40.0
    acoustic_scale: float = 0.1
    transition_scale: float = 1.0
    self_loop_scale: float = 0.1
    careful: bool = False


def equal_alignment(graph: kaldifst.StdVectorFst, num_frames: int, utt: str) -> np.ndarray | None:
    """Transition-ids of a random graph path of ``num_frames`` frames, None when there is none.

    The seed comes from the utterance id, so reruns give the same flat start.
    """
    seed = zlib.crc32(utt.encode()) & 0x7FFFFFFF
    ok, path = kaldifst.equal_align(ifst=graph, length=num_frames, rand_seed=seed, num_retries=10)
    if not ok:
        return None
    ok, tids, _, _ = kaldifst.get_linear_symbol_sequence(path)
    if not ok or len(tids) != num_frames:
        return None
    return np.asarray(tids, dtype=np.int32)


def matrix_decodable(loglikes: np.ndarray, tid_to_pdf: np.ndarray,
                     opts: AlignOptions) -> khg.DecodableInterface:
    """A network's frames x pdfs pseudo log-likelihoods as a decodable (nnet3-align-compiled's
    DecodableMatrixScaledMapped): khg's matrix decodable indexes columns by 1-based label,
    so the matrix gets one column per transition-id, its pdf's."""
    columns = (loglikes * opts.acoustic_scale)[:, tid_to_pdf[1:]]
    return khg.DecodableCtc(np.ascontiguousarray(columns, dtype=np.float32))


def viterbi_alignment(
    graph: kaldifst.StdVectorFst,
    decodable: khg.DecodableInterface,
    num_frames: int,
    trans_model: khg.TransitionModel,
    utt: str,
    opts: AlignOptions,
) -> tuple[np.ndarray, float] | None:
    """Best path's transition-ids and its log-likelihood, or None when the beams fail.

    The graph is copied and given the current transition probabilities (scaled), as
    gmm-align-compiled does with AddTransitionProbs before decoding.
    """
    fst = graph.copy()
    khg.add_transition_probs(
        trans_model=trans_model,
        transition_scale=opts.transition_scale,
        self_loop_scale=opts.self_loop_scale,
        fst=fst,
    )
    config = khg.AlignConfig(beam=opts.beam, retry_beam=opts.retry_beam, careful=opts.careful)
    done, _, _, like, _, ali, _ = khg.align_utterance_wrapper(
        config=config,
        utt=utt,
        acoustic_scale=opts.acoustic_scale,
        fst=fst,
        decodable=decodable,
        num_done=0,
        num_error=0,
        num_retried=0,
        tot_like=0.0,
        frame_count=0,
    )
    if done != 1 or len(ali) != num_frames:
        return None
    return np.asarray(ali, dtype=np.int32), like
