"""A final.mdl's TransitionModel rebuilt in khg from its tree, probabilities and all."""

from __future__ import annotations

import kaldi_hmm_gmm as khg  # noqa: I001  (must be imported before anything loading kaldifst)
import numpy as np
import pytest

from asrdist.errors import AsrdistError
from asrdist.hmm.transitions import khg_transition_model
from asrdist.kaldi.transition_model import transition_info_from_khg
from tests.kaldi.test_transition_model import TOPO, monophone_model


def test_the_rebuilt_model_has_the_models_probabilities() -> None:
    tm, tree = monophone_model(TOPO)
    counts = np.random.default_rng(0).uniform(1, 100, tm.num_transition_ids + 1)
    tm.mle_update(counts, khg.MleTransitionUpdateConfig())
    info = transition_info_from_khg(tm)
    rebuilt = khg_transition_model(info, tree, "final.mdl")
    np.testing.assert_allclose(np.exp(rebuilt.log_probs), np.exp(info.log_probs), atol=1e-5)


def test_a_tree_of_other_phones_is_refused() -> None:
    tm, _ = monophone_model(TOPO)
    topo = khg.HmmTopology()
    topo.read(TOPO)
    shared = khg.monophone_context_dependency_shared([[1], [2, 3], [4]],
                                                     topo.get_phone_to_num_pdf_classes())
    with pytest.raises(AsrdistError, match="final.mdl: the tree does not produce"):
        khg_transition_model(transition_info_from_khg(tm), shared, "final.mdl")
