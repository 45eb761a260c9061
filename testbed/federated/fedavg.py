"""Real FedAvg in PyTorch (CPU, one thread, deterministic).

Each selected site starts from the global model, trains ``local_epochs`` epochs of minibatch SGD on
its own shard (order shuffled by a generator seeded from (seed, round, site)), and returns its
weights; the new global model is the sample-weighted average

    w_global = sum_i n_i w_i / sum_i n_i

computed in float64 and stored in the model's dtype. The centralized baseline trains the same way
on the union of all shards. Models have no dropout or batch statistics, so a round is a pure
function of (global weights, shards, seeds).
"""

from __future__ import annotations

import io
from collections import OrderedDict

import torch
import torch.nn.functional as F
from torch import nn

from testbed.nodes.models import MLP, SmallCNN
from testbed.seeding import derive_seed


def make_model(kind: str, *, hidden: int, n_classes: int, seed: int) -> nn.Module:
    torch.manual_seed(derive_seed(seed, "fl-init") & 0x7FFFFFFF)
    if kind == "mlp":
        return MLP(n_in=64, hidden=hidden, n_classes=n_classes, dropout=0.0)
    if kind == "cnn":
        return SmallCNN(n_classes=n_classes, dropout=0.0)
    raise ValueError(f"unknown model {kind!r} (known: mlp, cnn)")


def clone_state(model: nn.Module) -> "OrderedDict[str, torch.Tensor]":
    return OrderedDict((k, v.detach().clone()) for k, v in model.state_dict().items())


def local_train(model: nn.Module, start: "OrderedDict[str, torch.Tensor]", x: torch.Tensor, y: torch.Tensor, *,
                epochs: int, batch_size: int, lr: float, momentum: float, seed: int) -> "OrderedDict[str, torch.Tensor]":
    model.load_state_dict(start)
    model.train()
    opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=momentum)
    gen = torch.Generator().manual_seed(seed & 0x7FFFFFFFFFFFFFFF)
    n = len(y)
    for _ in range(epochs):
        order = torch.randperm(n, generator=gen)
        for i in range(0, n, batch_size):
            idx = order[i:i + batch_size]
            opt.zero_grad(set_to_none=True)
            F.cross_entropy(model(x[idx]), y[idx]).backward()
            opt.step()
    return clone_state(model)


def average(states: list["OrderedDict[str, torch.Tensor]"], weights: list[float]) -> "OrderedDict[str, torch.Tensor]":
    if not states or len(states) != len(weights):
        raise ValueError("average: need one weight per state, at least one")
    total = float(sum(weights))
    if total <= 0:
        raise ValueError("average: weights must sum to > 0")
    out = OrderedDict()
    for key, ref in states[0].items():
        acc = torch.zeros(ref.shape, dtype=torch.float64)
        for s, w in zip(states, weights):
            acc += s[key].to(torch.float64) * (w / total)
        out[key] = acc.to(ref.dtype)
    return out


@torch.no_grad()
def accuracy(model: nn.Module, state, x: torch.Tensor, y: torch.Tensor) -> float:
    model.load_state_dict(state)
    model.eval()
    return float((model(x).argmax(dim=-1) == y).float().mean())


def serialize(state) -> bytes:
    buf = io.BytesIO()
    torch.save(state, buf)
    return buf.getvalue()


def round_seed(seed: int, round_: int, site: str) -> int:
    return derive_seed(seed, "fl-round", round_, site)
