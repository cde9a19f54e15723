"""MMI and boosted MMI on a two-path lattice, value and gradient computed by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from asrdist.decode.lattice import CompactLattice
from asrdist.errors import AsrdistError
from asrdist.train.sequence_loss import (
    Numerator,
    SequenceOptions,
    objective_and_gradient,
    sequence_loss,
    smbr_objective_and_gradient,
)

F = np.float32
TID_TO_PDF = np.array([-1, 0, 1])  # tid 1 -> pdf 0 (phone 1), tid 2 -> pdf 1 (phone 2)
TID_TO_PHONE = np.array([0, 1, 2])
SCORES = [[-1.0, -2.0], [-3.0, -0.5]]


def two_paths() -> CompactLattice:
    """A: tids 1 2, graph cost 0; B: tids 2 2, graph cost 0.5; acoustic costs are replaced."""
    return CompactLattice(arcs=[[(1, (F(0.0), F(7.0)), (1, 2), 1),
                                 (2, (F(0.5), F(7.0)), (2, 2), 1)], []],
                          final=[None, ((F(0.0), F(0.0)), ())], start=0)


def numerator(alignment=(1, 2)) -> Numerator:
    return Numerator(np.array(alignment), TID_TO_PDF, TID_TO_PHONE)


def test_mmi_by_hand():
    """kappa 0.5: A scores 0.5 (-1 - 0.5) = -0.75, B -0.5 + 0.5 (-2 - 0.5) = -1.75, so
    F = log p(A) = -log(1 + e^-1). Frame 0: gamma_den = (pA, 1 - pA) against the numerator's
    pdf 0, gradient 0.5 (1 - pA, -(1 - pA)); frame 1 is pdf 1 on both paths: no gradient."""
    p_a = 1.0 / (1.0 + math.exp(-1.0))
    objective, grad, kept = objective_and_gradient(np.array(SCORES), two_paths(), numerator(),
                                                   SequenceOptions(acoustic_scale=0.5))
    assert objective == pytest.approx(math.log(p_a))
    assert grad == pytest.approx(np.array([[0.5 * (1 - p_a), -0.5 * (1 - p_a)], [0.0, 0.0]]))
    assert kept == 2


def test_the_loss_backpropagates_minus_the_gradient():
    """Against autograd through the objective written out for this lattice by hand."""
    scores = torch.tensor(SCORES, dtype=torch.float64, requires_grad=True)
    opts = SequenceOptions(acoustic_scale=0.5)
    loss = sequence_loss(scores, [(two_paths(), numerator())], opts)
    loss.backward()
    by_hand = torch.tensor(SCORES, dtype=torch.float64, requires_grad=True)
    s = by_hand
    a = 0.5 * (s[0, 0] + s[1, 1])
    b = -0.5 + 0.5 * (s[0, 1] + s[1, 1])
    expected = -(a - torch.logsumexp(torch.stack([a, b]), 0))
    expected.backward()
    assert loss.item() == pytest.approx(expected.item())
    assert torch.allclose(scores.grad, by_hand.grad)


def test_boosting_lifts_the_path_with_the_wrong_phone():
    """b = 1: B's frame 0 has phone 2 where the numerator has 1, so its graph cost drops by
    1 to -0.5 and B scores -0.75, as A: p(A) = 1/2, F = -log 2."""
    objective, _, _ = objective_and_gradient(np.array(SCORES), two_paths(), numerator(),
                                             SequenceOptions(acoustic_scale=0.5, boost=1.0))
    assert objective == pytest.approx(-math.log(2.0))


def test_frames_the_lattice_cannot_explain_get_no_gradient():
    """Numerator tids 1 1: no path has pdf 0 at frame 1, so that frame is dropped."""
    _, grad, kept = objective_and_gradient(np.array(SCORES), two_paths(), numerator((1, 1)),
                                           SequenceOptions(acoustic_scale=0.5))
    assert kept == 1 and not grad[1].any()
    _, grad, kept = objective_and_gradient(np.array(SCORES), two_paths(), numerator((1, 1)),
                                           SequenceOptions(acoustic_scale=0.5, drop_frames=False))
    assert kept == 2 and grad[1, 0] == pytest.approx(0.5)


def test_scores_of_another_length_are_refused():
    with pytest.raises(AsrdistError, match="3 frames of scores but 2"):
        objective_and_gradient(np.zeros((3, 2)), two_paths(), numerator(), SequenceOptions())


def test_smbr_by_hand():
    """kappa 0.5, no silence: A (pdfs 0 1) has both frames right, B (pdfs 1 1) frame 1 only,
    so the expected accuracy is 2 pA + (1 - pA) = 1 + pA. Its gradient in s[0, 0] (on A
    only) is 0.5 pA (1 - pA) (A's accuracy 2 over the mean 1 + pA), minus that in s[0, 1]
    (on B only); frame 1 is the same pdf on both paths: no gradient."""
    p_a = 1.0 / (1.0 + math.exp(-1.0))
    opts = SequenceOptions(criterion="smbr", acoustic_scale=0.5)
    accuracy, grad, frames = smbr_objective_and_gradient(np.array(SCORES), two_paths(),
                                                         numerator(), opts)
    assert accuracy == pytest.approx(1.0 + p_a)
    g = 0.5 * p_a * (1.0 - p_a)
    assert grad == pytest.approx(np.array([[g, -g], [0.0, 0.0]]), abs=1e-6)
    assert frames == 2


def test_the_smbr_loss_backpropagates_minus_the_expected_accuracy():
    """Against autograd through the expected accuracy written out for this lattice."""
    scores = torch.tensor(SCORES, dtype=torch.float64, requires_grad=True)
    opts = SequenceOptions(criterion="smbr", acoustic_scale=0.5)
    loss = sequence_loss(scores, [(two_paths(), numerator())], opts)
    loss.backward()
    s = torch.tensor(SCORES, dtype=torch.float64, requires_grad=True)
    a = 0.5 * (s[0, 0] + s[1, 1])
    b = -0.5 + 0.5 * (s[0, 1] + s[1, 1])
    p = torch.softmax(torch.stack([a, b]), 0)
    expected = -(2.0 * p[0] + 1.0 * p[1])
    expected.backward()
    assert loss.item() == pytest.approx(expected.item(), rel=1e-6)
    assert torch.allclose(scores.grad, s.grad, atol=1e-6)


def test_a_batch_of_utterances_is_the_sum_of_each_alone():
    """Two utterances' scores stacked: the loss adds up and each gets its own gradient."""
    opts = SequenceOptions(acoustic_scale=0.5)
    one = torch.tensor(SCORES, dtype=torch.float64, requires_grad=True)
    sequence_loss(one, [(two_paths(), numerator())], opts).backward()
    both = torch.tensor(SCORES + SCORES[::-1], dtype=torch.float64, requires_grad=True)
    loss = sequence_loss(both, [(two_paths(), numerator()), (two_paths(), numerator((2, 1)))],
                         opts)
    loss.backward()
    alone = torch.tensor(SCORES[::-1], dtype=torch.float64, requires_grad=True)
    second = sequence_loss(alone, [(two_paths(), numerator((2, 1)))], opts)
    second.backward()
    first = sequence_loss(one.detach(), [(two_paths(), numerator())], opts)
    assert loss.item() == pytest.approx(first.item() + second.item())
    assert torch.allclose(both.grad, torch.cat([one.grad, alone.grad]))
    with pytest.raises(AsrdistError, match="4 frames of scores but 2"):
        sequence_loss(both, [(two_paths(), numerator())], opts)
