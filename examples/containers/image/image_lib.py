"""A library only the example image has (COPY'd to /opt/example/lib, on its PYTHONPATH): the
model's maths. Pure Python, so the image needs nothing beyond Debian's python3."""

from __future__ import annotations

import random

NAME = "image_lib 1.0"
N_FEATURES = 8


def make_data(seed: int, n: int = 256) -> tuple[list[list[float]], list[float]]:
    rng = random.Random(seed)
    w_true = [rng.uniform(-1, 1) for _ in range(N_FEATURES)]
    xs = [[rng.gauss(0, 1) for _ in range(N_FEATURES)] for _ in range(n)]
    ys = [sum(w * x for w, x in zip(w_true, row)) + rng.gauss(0, 0.1) for row in xs]
    return xs, ys


def sgd_step(w: list[float], xs: list[list[float]], ys: list[float], lr: float) -> float:
    """One step of mini-batch SGD on squared error, in place; the batch's mean loss before it."""
    grad = [0.0] * len(w)
    loss = 0.0
    for row, y in zip(xs, ys):
        err = sum(wi * xi for wi, xi in zip(w, row)) - y
        loss += err * err
        for i, xi in enumerate(row):
            grad[i] += 2 * err * xi
    for i in range(len(w)):
        w[i] -= lr * grad[i] / len(xs)
    return loss / len(xs)
