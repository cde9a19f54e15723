"""The stacked computation against G separate models: losses, gradients and SGD updates."""

import copy

import pytest
import torch

from asrdist.models.build import ModelConfig, build_model
from asrdist.optim.ngsgd import NGSGD, NGOptions
from asrdist.simulate.stacked import stackable, stacked_frame_loss
from asrdist.train.loss import IGNORE, frame_loss

CONFIGS = {
    "blstm": ModelConfig(layers=2, units=6, bottleneck=5, chunk_left_context=2,
                         chunk_right_context=1),
    "blstm-plain": ModelConfig(layers=1, units=4),
    "dnn": ModelConfig(type="dnn", splice=2, hidden_layers=2, hidden_units=7),
    "dnn-sigmoid": ModelConfig(type="dnn", splice=1, hidden_layers=1, hidden_units=5,
                               activation="sigmoid"),
    # any other model: its own forward mapped over the learners (torch.func.vmap)
    "conformer": ModelConfig(type="conformer", conformer_blocks=2, attention_dim=8,
                             attention_heads=2, conv_kernel=3, chunk_left_context=2,
                             chunk_right_context=1),
}
DIM, PDFS, G = 3, 5, 4


def _learners(config: ModelConfig) -> list[torch.nn.Module]:
    torch.manual_seed(0)
    return [build_model(config, DIM, PDFS) for _ in range(G)]  # different weights each


def _batches(model: torch.nn.Module, frames: int = 4) -> tuple[torch.Tensor, torch.Tensor]:
    torch.manual_seed(1)
    width = model.left_context + frames + model.right_context
    x = torch.randn(G, 3, width, DIM)
    y = torch.randint(0, PDFS, (G, 3, frames))
    y[0, 0, 1] = IGNORE  # an unlabelled frame counts in no mean
    return x, y


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_losses_gradients_and_updates_equal_separate_models(name):
    models = _learners(CONFIGS[name])
    x, y = _batches(models[0])
    names = [n for n, _ in models[0].named_parameters()]
    stacked = [torch.stack([p.detach() for p in ps]).requires_grad_()
               for ps in zip(*[m.parameters() for m in models], strict=True)]
    losses = stacked_frame_loss(models[0], dict(zip(names, stacked, strict=True)), x, y)
    losses.sum().backward()
    for g, model in enumerate(models):
        loss = frame_loss(model, x[g], y[g])
        loss.backward()
        torch.testing.assert_close(losses[g], loss, rtol=1e-5, atol=1e-6)
        for p, s in zip(model.parameters(), stacked, strict=True):
            torch.testing.assert_close(s.grad[g], p.grad, rtol=1e-4, atol=1e-6)
        before = [p.detach().clone() for p in model.parameters()]
        torch.optim.SGD(model.parameters(), lr=0.5).step()
        for p, s, w in zip(model.parameters(), stacked, before, strict=True):
            torch.testing.assert_close(w - 0.5 * s.grad[g], p.detach(), rtol=1e-4, atol=1e-6)


def test_what_it_cannot_compute_exactly_is_refused():
    blstm = build_model(ModelConfig(layers=2, units=4, dropout=0.2), DIM, PDFS)
    assert not stackable(blstm)
    assert stackable(blstm.eval())  # dropout is off in eval mode
    dnn = build_model(ModelConfig(type="dnn", hidden_layers=1, hidden_units=4, dropout=0.1),
                      DIM, PDFS)
    assert not stackable(dnn) and stackable(dnn.eval())
    plain = build_model(CONFIGS["dnn"], DIM, PDFS)
    assert stackable(plain)
    NGSGD(plain, NGOptions(), lr=0.1)  # hooks the layers it preconditions
    assert not stackable(plain)
    conformer = ModelConfig(type="conformer", conformer_blocks=1, attention_dim=4,
                            attention_heads=2, conv_kernel=3)
    assert stackable(build_model(conformer, DIM, PDFS))
    assert not stackable(build_model(ModelConfig(**{**conformer.to_dict(), "dropout": 0.1}),
                                     DIM, PDFS))
    tdnnf = ModelConfig(type="tdnnf", tdnnf_layers=1, tdnnf_dim=4, tdnnf_bottleneck=2)
    assert not stackable(build_model(tdnnf, DIM, PDFS))  # batchnorm statistics: buffers
    assert stackable(copy.deepcopy(build_model(CONFIGS["blstm"], DIM, PDFS)))
