from __future__ import annotations

import math

import torch

from asrdist.data.dataset import IGNORE
from asrdist.train.loss import frame_loss, frame_scores


def test_unlabelled_frames_are_neither_scored_nor_counted():
    logits = torch.tensor([[2.0, 0.0], [0.0, 2.0], [5.0, -5.0]])
    target = torch.tensor([0, 0, IGNORE])
    ce, correct, frames = frame_scores(logits, target)
    low, high = math.log1p(math.exp(-2.0)), math.log1p(math.exp(2.0))
    assert frames == 2 and correct == 1
    assert math.isclose(ce, low + high, rel_tol=1e-6)


def test_the_training_loss_is_the_mean_of_the_scored_frames():
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 3)
    x, y = torch.randn(2, 5, 4), torch.randint(3, (2, 5))
    y[0, :2] = IGNORE
    ce, _, frames = frame_scores(model(x).flatten(0, 1), y.flatten())
    assert math.isclose(frame_loss(model, x, y).item(), ce / frames, rel_tol=1e-6)
