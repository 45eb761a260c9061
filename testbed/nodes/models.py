"""The small models that stand in for the paper's workloads (see :mod:`testbed.nodes.workloads`).

Every model maps ``x`` to logits whose last dimension is the class (or vocabulary) axis, so one loss
(cross-entropy over the flattened logits) and one accuracy serve all of them. Each has dropout, so
a resumed job is only bit-identical if the random-number state travels with the checkpoint.
Pooling layers are avoided (a stride-2 convolution downsamples instead): several pooling backward
kernels have no deterministic CUDA implementation.

Size: :func:`widen` grows any of them to a chosen number of parameter bytes with a residual
two-layer block on the logits (``logits + W2 relu(W1 logits) / width``, ``W2`` zero at the start, so the
model begins as the small one and every added weight is trained), so that a checkpoint of 1-10 GB
is a real model's state (with Adam's two moments, about 3x the parameter bytes), not padding.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


class MLP(nn.Module):
    """64 -> hidden -> hidden -> classes, ReLU, dropout."""

    def __init__(self, n_in: int = 64, hidden: int = 128, n_classes: int = 10, dropout: float = 0.1):
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(n_in, hidden), nn.ReLU(), nn.Dropout(dropout),
            nn.Linear(hidden, hidden), nn.ReLU(), nn.Dropout(dropout),
            nn.Linear(hidden, n_classes),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


class SmallCNN(nn.Module):
    """An 8x8 image classifier: conv 3x3 (16) -> conv 3x3 stride 2 (32) -> dropout -> linear."""

    def __init__(self, n_classes: int = 10, side: int = 8, dropout: float = 0.1):
        super().__init__()
        self.side = side
        self.conv1 = nn.Conv2d(1, 16, 3, padding=1)
        self.conv2 = nn.Conv2d(16, 32, 3, stride=2, padding=1)
        self.drop = nn.Dropout(dropout)
        self.head = nn.Linear(32 * (side // 2) ** 2, n_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.reshape(-1, 1, self.side, self.side)
        x = F.relu(self.conv2(F.relu(self.conv1(x))))
        return self.head(self.drop(x.flatten(1)))


class _Block(nn.Module):
    """A pre-norm causal self-attention block (written out, so no fast path or nested tensors)."""

    def __init__(self, d_model: int, n_heads: int, dropout: float):
        super().__init__()
        self.n_heads = n_heads
        self.ln1 = nn.LayerNorm(d_model)
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.proj = nn.Linear(d_model, d_model)
        self.ln2 = nn.LayerNorm(d_model)
        self.mlp = nn.Sequential(nn.Linear(d_model, 4 * d_model), nn.GELU(), nn.Linear(4 * d_model, d_model))
        self.drop = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=2)
        q, k, v = (z.reshape(b, t, self.n_heads, d // self.n_heads).transpose(1, 2) for z in (q, k, v))
        mask = torch.ones(t, t, dtype=torch.bool, device=x.device).tril()
        att = (q @ k.transpose(-2, -1)) * (d // self.n_heads) ** -0.5
        att = att.masked_fill(~mask, float("-inf")).softmax(dim=-1)
        y = (att @ v).transpose(1, 2).reshape(b, t, d)
        x = x + self.drop(self.proj(y))
        return x + self.drop(self.mlp(self.ln2(x)))


class CharTransformer(nn.Module):
    """A tiny GPT-style character model: token + position embeddings, ``n_layers`` blocks, a head."""

    def __init__(self, vocab: int, block: int, d_model: int = 64, n_heads: int = 4, n_layers: int = 2,
                 dropout: float = 0.1):
        super().__init__()
        self.tok = nn.Embedding(vocab, d_model)
        self.pos = nn.Embedding(block, d_model)
        self.drop = nn.Dropout(dropout)
        self.blocks = nn.ModuleList(_Block(d_model, n_heads, dropout) for _ in range(n_layers))
        self.ln = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, vocab)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        pos = torch.arange(idx.shape[1], device=idx.device)
        x = self.drop(self.tok(idx) + self.pos(pos))
        for blk in self.blocks:
            x = blk(x)
        return self.head(self.ln(x))


MAX_MODEL_MB = 100_000.0  # what a size option may ask for (100 GB of parameters)


class Widened(nn.Module):
    """``base`` followed by a residual block of width ``hidden`` over its last (class) dimension."""

    def __init__(self, base: nn.Module, n_out: int, hidden: int):
        super().__init__()
        self.base = base
        self.up = nn.Linear(n_out, hidden)
        self.down = nn.Linear(hidden, n_out)
        nn.init.zeros_(self.down.weight)
        nn.init.zeros_(self.down.bias)
        self.scale = 1.0 / hidden

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.base(x)
        # scaled by 1/hidden (mean-field): a step of any optimizer moves the output by O(lr) whatever the
        # width, so a block of millions of units trains as stably as the small model
        return y + self.down(F.relu(self.up(y))) * self.scale


def width_for_bytes(base_params: int, n_out: int, param_bytes: float, bytes_per_param: int = 4) -> int:
    """The hidden width that brings a model of ``base_params`` to ``param_bytes`` of parameters
    (at least 1: a size below the base model's own is refused by :func:`widen`)."""
    extra = param_bytes / bytes_per_param - base_params - n_out  # the block's parameters: 2 n h + h + n
    return max(1, int(extra // (2 * n_out + 1)))


def widen(model: nn.Module, n_out: int, param_bytes: float) -> nn.Module:
    """``model`` grown to about ``param_bytes`` of float32 parameters (see the module docstring)."""
    base = n_params(model)
    if not param_bytes > 4 * (base + 2 * n_out + 1):
        raise ValueError(f"a model of {param_bytes / 1e6:g} MB is not larger than the stand-in's own "
                         f"{4 * base / 1e6:.3f} MB")
    return Widened(model, n_out, width_for_bytes(base, n_out, param_bytes))


def n_params(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())
