"""The generated ``shapes`` data set: deterministic, 8x8 x 10 classes like digits, and harder."""

from __future__ import annotations

import torch

from testbed.federated.data import DATASETS, load_dataset, partition
from testbed.federated.fedavg import make_model
from testbed.nodes.datasets import shape_templates, shapes


def test_same_tensors_every_time_and_the_shape_of_digits():
    a, b = shapes(), load_dataset("shapes")
    assert a is b and a.fingerprint == shapes.__wrapped__().fingerprint  # regenerated: identical
    assert a.x_train.shape == (4800, 64) and a.x_test.shape == (1200, 64) and a.n_classes == 10
    assert set(a.y_train.tolist()) == set(range(10))
    assert len({t.tobytes() for t in shape_templates()}) == 10  # ten different classes
    assert set(DATASETS) == {"digits", "shapes"}


def _accuracy(name: str, epochs: int) -> float:
    ds = load_dataset(name)
    torch.manual_seed(0)
    m = make_model("mlp", hidden=64, n_classes=10, seed=0)
    opt = torch.optim.SGD(m.parameters(), lr=0.05)
    g = torch.Generator().manual_seed(0)
    for _ in range(epochs):
        perm = torch.randperm(ds.n_train, generator=g)
        for i in range(0, ds.n_train, 16):
            idx = perm[i:i + 16]
            opt.zero_grad()
            torch.nn.functional.cross_entropy(m(ds.x_train[idx]), ds.y_train[idx]).backward()
            opt.step()
    with torch.no_grad():
        return float((m(ds.x_test).argmax(1) == ds.y_test).float().mean())


def test_harder_than_digits_but_learnable():
    digits_acc, shapes_acc = _accuracy("digits", 8), _accuracy("shapes", 8)
    assert digits_acc > 0.85 and 0.5 < shapes_acc < digits_acc - 0.05


def test_it_partitions_like_digits():
    sh = partition(load_dataset("shapes"), ["a", "b", "c"], scheme="dirichlet", alpha=0.1, seed=1)
    assert sum(sh.n(s) for s in "abc") == 4800 and min(sh.n(s) for s in "abc") >= 2
