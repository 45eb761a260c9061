"""The bundled data sets of the training stand-ins: nothing is downloaded, ever.

- ``digits``: scikit-learn's bundled 8x8 handwritten digits (1797 samples, 10 classes), pixels
  scaled to [0, 1]. A fixed split (seeded by the data set, not by the job): 1437 train / 360 test.
- ``shapes``: a generated 8x8 image set, harder than ``digits`` (6000 samples, 10 classes: bars,
  diagonals, crosses, outlines, corners...). Every image is one class's template, shifted by up to
  one pixel, scaled in contrast, partly occluded and covered in Gaussian noise, all drawn from a
  fixed seed (:data:`SHAPES_SEED`), so it is the same on every machine. 4800 train / 1200 test.
- ``text``: a character-level language-modelling set (about 85 000 characters): the Zen of Python
  (read from the source of the ``this`` module and rot13-decoded; importing ``this`` would print
  it) followed by the docstrings of a fixed list of standard-library modules, read with ``ast``
  from the installed sources (:data:`TEXT_MODULES`). The vocabulary is fixed (newline and printable
  ASCII, 96 symbols; anything else becomes ``?``). The text is cut into 512-character chunks, every
  7th chunk is for testing; a sample is a window of ``BLOCK`` characters (every ``TEXT_STRIDE``-th
  start) and its target is the same window shifted by one character. The docstrings can change
  between Python releases: the fingerprint then changes, and a checkpoint made under another
  Python is refused rather than resumed on different data.

Every set carries a ``fingerprint`` (SHA-256 of its tensors): a checkpoint records it, and a resume
against different data is refused instead of silently diverging.
"""

from __future__ import annotations

import ast
import codecs
import hashlib
import importlib.util
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np
import torch

DIGITS_TEST_FRACTION = 0.2
DIGITS_SPLIT_SEED = 20240603
BLOCK = 32
SHAPES_SEED = 20261201
SHAPES_N = 6000
SHAPES_NOISE = 0.25
TEXT_STRIDE = 8
TEXT_CHUNK = 512
TEXT_TEST_EVERY = 7
TEXT_MODULES = ("heapq", "bisect", "textwrap", "json", "fractions", "functools", "calendar", "statistics", "difflib")
VOCAB = "\n" + "".join(chr(c) for c in range(32, 127))
VOCAB_SET = frozenset(VOCAB)


@dataclass(frozen=True)
class Data:
    """A train/test split as CPU tensors. ``y`` holds class indices (``(N,)`` for classification,
    ``(N, BLOCK)`` next-character targets for language modelling); ``n_classes`` is the number of
    classes or the vocabulary size."""

    name: str
    x_train: torch.Tensor
    y_train: torch.Tensor
    x_test: torch.Tensor
    y_test: torch.Tensor
    n_classes: int
    fingerprint: str

    @property
    def n_train(self) -> int:
        return int(self.x_train.shape[0])

    def to(self, device: torch.device) -> Data:
        if device.type == "cpu":
            return self
        return Data(self.name, self.x_train.to(device), self.y_train.to(device), self.x_test.to(device),
                    self.y_test.to(device), self.n_classes, self.fingerprint)


def _fingerprint(*tensors: torch.Tensor) -> str:
    h = hashlib.sha256()
    for t in tensors:
        h.update(f"{t.dtype}{tuple(t.shape)}".encode())
        h.update(t.contiguous().reshape(-1).view(torch.uint8).numpy().tobytes())
    return h.hexdigest()


def digits_array() -> np.ndarray:
    """The 1797 x 65 digits table (64 pixels 0..16, then the label) that scikit-learn ships.

    Read straight from ``sklearn/datasets/data/digits.csv.gz`` (the file ``load_digits`` reads),
    because importing ``sklearn.datasets`` costs about 1.5 s per job process; if that file is not
    where it has been since scikit-learn 0.x, ``load_digits()`` itself is used.
    """
    spec = importlib.util.find_spec("sklearn")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("the digits workloads need scikit-learn (pip install scikit-learn)")
    path = Path(spec.submodule_search_locations[0]) / "datasets" / "data" / "digits.csv.gz"
    if path.is_file():
        return np.loadtxt(path, delimiter=",")
    from sklearn.datasets import load_digits  # pragma: no cover - fallback for another layout

    bunch = load_digits()  # pragma: no cover
    return np.column_stack([bunch.data, bunch.target])  # pragma: no cover


@lru_cache(maxsize=1)
def digits() -> Data:
    table = digits_array()
    x = torch.tensor(table[:, :-1], dtype=torch.float32) / 16.0
    y = torch.tensor(table[:, -1], dtype=torch.int64)
    order = torch.randperm(len(y), generator=torch.Generator().manual_seed(DIGITS_SPLIT_SEED))
    n_test = round(len(y) * DIGITS_TEST_FRACTION)
    test, train = order[:n_test], order[n_test:]
    parts = (x[train], y[train], x[test], y[test])
    return Data("digits", *parts, n_classes=10, fingerprint=_fingerprint(*parts))


def shape_templates() -> np.ndarray:
    """The 10 class templates of ``shapes``: 8x8 arrays in {0, 1}."""
    t = np.zeros((10, 8, 8))
    t[0, 3:5, 1:7] = 1                                  # horizontal bar
    t[1, 1:7, 3:5] = 1                                  # vertical bar
    for i in range(1, 7):
        t[2, i, i] = t[3, i, 7 - i] = 1                 # diagonal, anti-diagonal
        t[4, i, i] = t[4, i, 7 - i] = 1                 # X
    t[5, 3:5, 1:7] = 1
    t[5, 1:7, 3:5] = 1                                  # plus
    t[6, 1, 1:7] = t[6, 6, 1:7] = t[6, 1:7, 1] = t[6, 1:7, 6] = 1   # square outline
    t[7, 2:6, 2:6] = 1                                  # filled square
    t[8, 1:7, 1] = 1
    t[8, 6, 1:7] = 1                                    # L
    t[9, 1, 1:7] = 1
    t[9, 1:7, 3:5] = 1                                  # T
    return t


@lru_cache(maxsize=1)
def shapes() -> Data:
    """The generated ``shapes`` set (module docstring); the same tensors on every machine."""
    rng = np.random.default_rng(SHAPES_SEED)
    templates = shape_templates()
    y = rng.integers(0, 10, SHAPES_N)
    x = np.empty((SHAPES_N, 8, 8))
    for i, c in enumerate(y):
        img = np.roll(templates[c], (int(rng.integers(-1, 2)), int(rng.integers(-1, 2))), axis=(0, 1))
        img = img * rng.uniform(0.4, 1.0)
        r0, c0 = rng.integers(0, 6, 2)
        img[r0:r0 + 3, c0:c0 + 3] *= rng.random() < 0.5   # half the images lose a 3x3 patch
        x[i] = img + rng.normal(0.0, SHAPES_NOISE, (8, 8))
    x_t = torch.tensor(np.clip(x, -1.0, 2.0).reshape(SHAPES_N, 64), dtype=torch.float32)
    y_t = torch.tensor(y, dtype=torch.int64)
    n_test = SHAPES_N // 5
    parts = (x_t[n_test:], y_t[n_test:], x_t[:n_test], y_t[:n_test])
    return Data("shapes", *parts, n_classes=10, fingerprint=_fingerprint(*parts))


def zen_text() -> str:
    """The Zen of Python, read from the ``this`` module's source without importing (printing) it."""
    tree = ast.parse(_module_source("this"))
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "s" for t in node.targets):
            return codecs.decode(ast.literal_eval(node.value), "rot13")
    raise RuntimeError("the 'this' module has no 's = ...' text")  # pragma: no cover


def _module_source(name: str) -> str:
    spec = importlib.util.find_spec(name)
    if spec is None or spec.origin is None:  # pragma: no cover - all are part of CPython
        raise RuntimeError(f"the standard library module {name!r} is missing")
    with open(spec.origin, encoding="utf-8") as f:
        return f.read()


def docstrings(module: str) -> list[str]:
    """Every docstring of a module's source (module, classes, functions), in source order."""
    tree = ast.parse(_module_source(module))
    kinds = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
    nodes = sorted((n for n in ast.walk(tree) if isinstance(n, kinds)), key=lambda n: getattr(n, "lineno", 0))
    return [d for n in nodes if (d := ast.get_docstring(n))]


def corpus_text() -> str:
    """The Zen of Python, then the docstrings of :data:`TEXT_MODULES`, in printable ASCII (any other
    character becomes ``?``)."""
    parts = [zen_text()] + [d for m in TEXT_MODULES for d in docstrings(m)]
    text = "\n\n".join(parts)
    return "".join(c if c in VOCAB_SET else "?" for c in text)


def _windows(ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    starts = torch.arange(0, len(ids) - BLOCK, TEXT_STRIDE)
    pos = starts.unsqueeze(1) + torch.arange(BLOCK).unsqueeze(0)
    return ids[pos], ids[pos + 1]


@lru_cache(maxsize=1)
def text() -> Data:
    corpus = corpus_text()
    ids = torch.tensor([VOCAB.index(c) for c in corpus], dtype=torch.int64)
    chunks = ids.split(TEXT_CHUNK)
    test_ids = torch.cat(chunks[TEXT_TEST_EVERY - 1::TEXT_TEST_EVERY])
    train_ids = torch.cat([c for i, c in enumerate(chunks) if i % TEXT_TEST_EVERY != TEXT_TEST_EVERY - 1])
    parts = (*_windows(train_ids), *_windows(test_ids))
    return Data("text", *parts, n_classes=len(VOCAB), fingerprint=_fingerprint(*parts))
