"""Federated data: a data set of :mod:`testbed.nodes.datasets` (:data:`DATASETS`: scikit-learn's
bundled ``digits``, or the generated, harder ``shapes``), its fixed held-out test split, and the
training split partitioned across sites, seeded. Both are 8x8 images of 10 classes, so every model
(``mlp``, ``cnn``) takes either.

- ``iid``: a seeded permutation of the training samples dealt round-robin, so shares differ by at
  most one sample.
- ``dirichlet``: for each class, the class's samples are split across sites in proportions drawn
  from ``Dirichlet(alpha)`` (small alpha = each site sees few classes; the usual non-IID benchmark
  partition). Every site then gets at least ``min_samples`` (taken from the largest shares), so
  no selected site has nothing to train on.

The partition depends only on (dataset, site names in order, scheme, alpha, seed): the same seed
gives the same shards.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from testbed.nodes.datasets import Data, digits, shapes

DATASETS = {"digits": digits, "shapes": shapes}
"""What ``federated.data.dataset`` can name."""


@dataclass(frozen=True)
class Shards:
    data: Data
    indices: dict[str, np.ndarray]  # site -> indices into data.x_train

    def n(self, site: str) -> int:
        return int(len(self.indices[site]))

    def x(self, site: str) -> torch.Tensor:
        return self.data.x_train[torch.from_numpy(self.indices[site])]

    def y(self, site: str) -> torch.Tensor:
        return self.data.y_train[torch.from_numpy(self.indices[site])]

    def class_counts(self, site: str) -> list[int]:
        y = self.data.y_train[torch.from_numpy(self.indices[site])]
        return torch.bincount(y, minlength=self.data.n_classes).tolist()


def load_dataset(name: str) -> Data:
    if name not in DATASETS:
        raise ValueError(f"unknown federated dataset {name!r} (known: {', '.join(DATASETS)})")
    return DATASETS[name]()


def partition(data: Data, sites: list[str], *, scheme: str = "iid", alpha: float = 0.5, seed: int = 0,
              min_samples: int = 2) -> Shards:
    if not sites:
        raise ValueError("partition: no sites")
    n_train = data.n_train
    if n_train < len(sites) * min_samples:
        raise ValueError(f"partition: {n_train} samples cannot give {len(sites)} sites {min_samples} each")
    rng = np.random.default_rng(seed)
    if scheme == "iid":
        order = rng.permutation(n_train)
        parts = [np.sort(order[i::len(sites)]) for i in range(len(sites))]
    elif scheme == "dirichlet":
        parts = _dirichlet(data.y_train.numpy(), len(sites), alpha, rng, min_samples)
    else:
        raise ValueError(f"unknown partition {scheme!r} (known: iid, dirichlet)")
    return Shards(data, {s: p.astype(np.int64) for s, p in zip(sites, parts)})


def _dirichlet(y: np.ndarray, n_sites: int, alpha: float, rng: np.random.Generator, min_samples: int) -> list[np.ndarray]:
    owner = np.empty(len(y), dtype=np.int64)
    for c in np.unique(y):
        idx = rng.permutation(np.flatnonzero(y == c))
        props = rng.dirichlet(np.full(n_sites, alpha))
        cuts = np.floor(np.cumsum(props)[:-1] * len(idx)).astype(int)
        for site, part in enumerate(np.split(idx, cuts)):
            owner[part] = site
    counts = np.bincount(owner, minlength=n_sites)
    for site in np.flatnonzero(counts < min_samples):  # top up from the largest shares, deterministically
        while counts[site] < min_samples:
            donor = int(np.argmax(counts))
            moved = np.flatnonzero(owner == donor)[0]
            owner[moved] = site
            counts[donor] -= 1
            counts[site] += 1
    return [np.flatnonzero(owner == s) for s in range(n_sites)]
