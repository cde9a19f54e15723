"""Restricted Boltzmann machines for DBN pretraining (Hinton et al. 2006; Kaldi nnet1).

Energy, with visible v, binary hidden h, weights W (hidden x visible), biases b (visible) and
c (hidden):

    Bernoulli-Bernoulli   E(v, h) = -b.v - c.h - h.W v                    (v binary)
    Gaussian-Bernoulli    E(v, h) = |v - b|^2 / 2 - c.h - h.W v           (v real, unit variance)

so p(h_j = 1 | v) = sigmoid(c_j + W_j.v) for both, and given h the visible units are
Bernoulli with p = sigmoid(b + W^T h), or Gaussian with mean b + W^T h. The Gaussian layer
needs inputs of zero mean and unit variance per dimension (the pretrainer normalises them).

CD-1 (contrastive divergence, one Gibbs step): sample h0 ~ p(h | v0); reconstruct v1 as the
mean of p(v | h0) (Hinton's practical guide: no sampling of the visible units); take the
hidden probabilities at v1; the gradient of the log-likelihood is approximated by the
difference of the data and reconstruction statistics:

    dW = <p(h|v0) v0^T> - <p(h|v1) v1^T>,  db = <v0 - v1>,  dc = <p(h|v0) - p(h|v1)>
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass
class CD1:
    """One minibatch's CD-1 statistics (an ascent direction of the log-likelihood, averaged
    over the rows) and the reconstruction's mean squared error (a progress figure)."""

    weight: torch.Tensor
    visible_bias: torch.Tensor
    hidden_bias: torch.Tensor
    recon_mse: float


def frozen(t: torch.Tensor) -> torch.nn.Parameter:
    """A parameter that CD-1 updates, not autograd (no gradient is kept)."""
    return torch.nn.Parameter(t, requires_grad=False)


class RBM(torch.nn.Module):
    """One RBM layer: parameters (weight, visible_bias, hidden_bias) and its conditionals; a
    module, so that a distributed strategy averages it as it does any model."""

    def __init__(self, visible: int, hidden: int, gaussian: bool,
                 generator: torch.Generator | None = None) -> None:
        super().__init__()
        self.gaussian = gaussian
        # Hinton's guide: small random weights, zero visible and hidden biases
        self.weight = frozen(torch.randn(hidden, visible, generator=generator) * 0.01)
        self.visible_bias = frozen(torch.zeros(visible))
        self.hidden_bias = frozen(torch.zeros(hidden))

    def hidden_probs(self, v: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(torch.addmm(self.hidden_bias, v, self.weight.T))

    def visible_mean(self, h: torch.Tensor) -> torch.Tensor:
        mean = torch.addmm(self.visible_bias, h, self.weight)
        return mean if self.gaussian else torch.sigmoid(mean)

    def cd1(self, v0: torch.Tensor, hidden_sample: torch.Tensor) -> CD1:
        """The CD-1 statistics of rows ``v0`` given the binary sample ``hidden_sample`` of
        h0 ~ p(h | v0) (passed in so that the estimate is a pure function of it)."""
        h0 = self.hidden_probs(v0)
        v1 = self.visible_mean(hidden_sample)
        h1 = self.hidden_probs(v1)
        n = len(v0)
        return CD1(
            weight=(h0.T @ v0 - h1.T @ v1) / n,
            visible_bias=(v0 - v1).mean(0),
            hidden_bias=(h0 - h1).mean(0),
            recon_mse=float(((v0 - v1) ** 2).mean()),
        )

    def sample_hidden(self, v0: torch.Tensor, generator: torch.Generator | None) -> torch.Tensor:
        probs = self.hidden_probs(v0)
        noise = torch.rand(probs.shape, generator=generator, device=probs.device)
        return (noise < probs).to(probs.dtype)
