"""The checks every decoder runs first: a graph, transition model and acoustic model that
belong together (the search itself: :mod:`asrdist.decode.lattice`)."""

from __future__ import annotations

from asrdist.errors import AsrdistError
from asrdist.kaldi.transition_model import TransitionInfo


def check_compatible(hclg_max_tid: int, graph_num_pdfs: int | None, trans: TransitionInfo,
                     scorer_num_pdfs: int, what: dict[str, str]) -> None:
    """Refuse a graph, transition model and acoustic model that do not belong together.

    ``what`` names the files for the message: keys graph, trans, model.
    """
    if scorer_num_pdfs != trans.num_pdfs:
        raise AsrdistError(
            f"{what['model']} has {scorer_num_pdfs} outputs but the transition model "
            f"{what['trans']} has {trans.num_pdfs} pdfs"
        )
    if graph_num_pdfs is not None and graph_num_pdfs != trans.num_pdfs:
        raise AsrdistError(
            f"{what['graph']} was built for {graph_num_pdfs} pdfs but {what['trans']} has "
            f"{trans.num_pdfs}: the graph does not belong to this model"
        )
    if hclg_max_tid > trans.num_transition_ids:
        raise AsrdistError(
            f"{what['graph']} uses transition-id {hclg_max_tid} but {what['trans']} has only "
            f"{trans.num_transition_ids}: the graph does not belong to this model"
        )
