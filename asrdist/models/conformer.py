"""Conformer acoustic model (Gulati et al., 2020) for the hybrid setup: frames in, pdf logits out.

Each block is the macaron layout: a half-step feed-forward, multi-head self-attention with
relative positions, a convolution module, a second half-step feed-forward, then LayerNorm.
There is no subsampling: the network scores every 10 ms frame, as the pdf targets and the HMM
decoder need (RWTH's hybrid Conformers subsample and upsample instead). Positions are relative:
a learned bias per head and clipped distance (Shaw et al., 2018, in T5's form), so attention
depends on how far apart two frames are, not where they sit in the window, and a chunk decoded
with other context widths sees the weights it was trained with. The convolution module's
normalisation is a LayerNorm, not BatchNorm: no running statistics that the strategies would
have to average beside the weights. The sizes are checked where they are given
(:class:`asrdist.models.build.ModelConfig`).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

FF_EXPANSION = 4  # the feed-forward's inner width, in model widths (the paper's)
MAX_DISTANCE = 64  # relative distances beyond this share one bias (640 ms at 10 ms frames)


class FeedForward(nn.Module):
    """LayerNorm, expand, SiLU, project back (the block adds half of it)."""

    def __init__(self, dim: int, dropout: float) -> None:
        super().__init__()
        self.net = nn.Sequential(
            nn.LayerNorm(dim), nn.Linear(dim, FF_EXPANSION * dim), nn.SiLU(), nn.Dropout(dropout),
            nn.Linear(FF_EXPANSION * dim, dim), nn.Dropout(dropout))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


class RelativeSelfAttention(nn.Module):
    """Multi-head self-attention whose scores get a learned bias for each head and clipped
    distance between key and query frame."""

    def __init__(self, dim: int, heads: int, dropout: float) -> None:
        super().__init__()
        self.heads, self.dropout = heads, dropout
        self.norm = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.out = nn.Linear(dim, dim)
        self.distance_bias = nn.Embedding(2 * MAX_DISTANCE + 1, heads)
        self.drop = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, frames, dim = x.shape
        q, k, v = self.qkv(self.norm(x)).view(batch, frames, 3, self.heads, dim // self.heads) \
            .permute(2, 0, 3, 1, 4)
        at = torch.arange(frames, device=x.device)
        distance = (at[None, :] - at[:, None]).clamp(-MAX_DISTANCE, MAX_DISTANCE) + MAX_DISTANCE
        bias = self.distance_bias(distance).permute(2, 0, 1).to(q.dtype)  # (heads, q, k)
        attended = F.scaled_dot_product_attention(
            q, k, v, attn_mask=bias, dropout_p=self.dropout if self.training else 0.0)
        return self.drop(self.out(attended.transpose(1, 2).reshape(batch, frames, dim)))


class ConvolutionModule(nn.Module):
    """LayerNorm, pointwise conv + GLU, depthwise conv over time, LayerNorm, SiLU, pointwise."""

    def __init__(self, dim: int, kernel: int, dropout: float) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.expand = nn.Conv1d(dim, 2 * dim, 1)
        self.depthwise = nn.Conv1d(dim, dim, kernel, padding=kernel // 2, groups=dim)
        self.depthwise_norm = nn.LayerNorm(dim)
        self.project = nn.Conv1d(dim, dim, 1)
        self.drop = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.glu(self.expand(self.norm(x).transpose(1, 2)), dim=1)
        y = self.depthwise_norm(self.depthwise(y).transpose(1, 2))
        return self.drop(self.project(F.silu(y).transpose(1, 2)).transpose(1, 2))


class ConformerBlock(nn.Module):
    def __init__(self, dim: int, heads: int, kernel: int, dropout: float) -> None:
        super().__init__()
        self.ff_in = FeedForward(dim, dropout)
        self.attention = RelativeSelfAttention(dim, heads, dropout)
        self.conv = ConvolutionModule(dim, kernel, dropout)
        self.ff_out = FeedForward(dim, dropout)
        self.norm = nn.LayerNorm(dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + 0.5 * self.ff_in(x)
        x = x + self.attention(x)
        x = x + self.conv(x)
        x = x + 0.5 * self.ff_out(x)
        return self.norm(x)


class Conformer(nn.Module):
    """A linear input layer, ``blocks`` Conformer blocks, a linear layer over the pdfs.

    Trained and decoded on windows as the BLSTM is: ``left_context``/``right_context`` extra
    input frames either side whose outputs are dropped (``forward`` takes other widths).
    """

    variable_context = True  # any left/right context at inference (Kaldi's extra-*-context)

    def __init__(self, input_dim: int, num_pdfs: int, blocks: int = 4, dim: int = 144,
                 heads: int = 4, kernel: int = 15, dropout: float = 0.0,
                 left_context: int = 0, right_context: int = 0) -> None:
        super().__init__()
        self.left_context = left_context
        self.right_context = right_context
        self.input = nn.Sequential(nn.Linear(input_dim, dim), nn.Dropout(dropout))
        self.blocks = nn.ModuleList(
            ConformerBlock(dim, heads, kernel, dropout) for _ in range(blocks))
        self.output = nn.Linear(dim, num_pdfs)

    def forward(self, feats: torch.Tensor, left: int | None = None,
                right: int | None = None) -> torch.Tensor:
        """(batch, left + frames + right, input_dim) -> (batch, frames, num_pdfs) logits;
        ``left``/``right`` default to the training context."""
        left = self.left_context if left is None else left
        right = self.right_context if right is None else right
        hidden = self.input(feats)
        for block in self.blocks:
            hidden = block(hidden)
        return self.output(hidden[:, left:hidden.shape[1] - right])
