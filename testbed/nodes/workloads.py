"""Training workloads, one registry of them by name (:data:`WORKLOADS`), and the map from a
scenario's ``family`` to one of them.

The paper's workload classes become small stand-ins that train for real on a CPU in milliseconds
per step (the scenario's ``checkpoint_gb`` is still what the WAN carries: the real checkpoint is the
head of the object and ballast pads it to the paper's size, see :mod:`testbed.transfer.source`).

==================  ==========================================  ====================================
workload            model and data                              stands in for (``family``)
==================  ==========================================  ====================================
``mlp-digits``      MLP 64-128-128-10 on sklearn digits, Adam   the default: any unknown family
                    (lr 3e-3), StepLR(500, 0.5), batch 64       (``custom`` included)
``cnn-digits``      2-layer CNN on the 8x8 digits, SGD          vision: ``resnet*``, ``vgg*``,
                    momentum (lr 0.05), StepLR(500, 0.5), b. 64 ``vit*``, ``efficientnet*``,
                                                                ``mobilenet*``, ``convnext*``
``char-transformer`` 2-layer causal transformer (d=64, 4 heads)  language: ``bert*``, ``gpt*``,
                    on bundled text (Zen of Python and stdlib   ``llama*``, ``t5*``, ``opt*``,
                    docstrings), 32-char windows,
                    AdamW (lr 3e-3), LinearLR warm-up 50, b. 32 ``mistral*``, ``falcon*``, ``roberta*``
==================  ==========================================  ====================================

A family resolves by exact workload name first, then by prefix (case-insensitive); anything else is
:data:`DEFAULT_WORKLOAD`. Schedules are defined for any number of steps (a job runs as long as the
controller lets it). ``build(seed, device)`` is a pure function of the seed: the initial weights come
from a private generator, the caller's random state is left untouched.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

import torch
from torch import nn
from torch.optim import SGD, Adam, AdamW, Optimizer
from torch.optim.lr_scheduler import LinearLR, LRScheduler, StepLR

from testbed.nodes import datasets, models
from testbed.nodes.datasets import Data
from testbed.nodes.rng import GLOBAL_RNG_LOCK
from testbed.registry import Registry
from testbed.seeding import derive_seed

DEFAULT_WORKLOAD = "mlp-digits"


class Built(NamedTuple):
    """What :meth:`Workload.build` returns; unpacks as ``model, optimizer, scheduler, data``."""

    model: nn.Module
    optimizer: Optimizer
    scheduler: LRScheduler
    data: Data


@dataclass(frozen=True)
class Workload:
    name: str
    stands_in_for: tuple[str, ...]  # family prefixes
    batch_size: int
    make_data: Callable[[], Data]
    make_model: Callable[[Data], nn.Module]
    make_optimizer: Callable[[nn.Module], Optimizer]
    make_scheduler: Callable[[Optimizer], LRScheduler]

    def build(self, seed: int, device: torch.device | str | None = None, model_mb: float | None = None) -> Built:
        """``model_mb``: grow the model to that many MB of parameters (:func:`models.widen`)."""
        dev = resolve_device(device)
        data = self.make_data()
        cuda = [dev.index or 0] if dev.type == "cuda" else []
        with GLOBAL_RNG_LOCK, torch.random.fork_rng(devices=cuda):
            torch.manual_seed(derive_seed(seed, "nodes", self.name, "init"))
            model = self.make_model(data)
            if model_mb is not None:
                model = models.widen(model, data.n_classes, model_mb * 1e6)
        model = model.to(dev)
        optimizer = self.make_optimizer(model)
        return Built(model, optimizer, self.make_scheduler(optimizer), data.to(dev))


def resolve_device(device: torch.device | str | None = None) -> torch.device:
    """``cuda`` (the current device) if one is available, else ``cpu``; an explicit choice wins."""
    if device is not None:
        return torch.device(device)
    return torch.device("cuda", torch.cuda.current_device()) if torch.cuda.is_available() else torch.device("cpu")


WORKLOADS: Registry[Workload] = Registry("workload")
"""Every workload by name, in registration order (the order :func:`for_family` tries prefixes in).
The built-in ones register below; another registers with :func:`register` from its own file."""


def register(workload: Workload) -> Workload:
    """Add a workload under its name (the same one again is a no-op; another under a taken name is
    refused with :class:`~testbed.registry.DuplicateNameError`, a ValueError)."""
    return WORKLOADS.add(workload.name, workload)


def names() -> list[str]:
    return sorted(WORKLOADS.names())


def get(name: str) -> Workload:
    """A workload by its exact registered name (``KeyError`` naming the known ones otherwise)."""
    if name not in WORKLOADS:
        raise KeyError(f"unknown workload {name!r}; known: {', '.join(names())}")
    return WORKLOADS.get(name)


def for_family(family: str) -> Workload:
    """The stand-in for a scenario ``family`` (exact name, then prefix, then the default)."""
    key = family.strip().lower()
    if key in WORKLOADS:
        return WORKLOADS.get(key)
    for _, wl in WORKLOADS.items():
        if any(key.startswith(prefix) for prefix in wl.stands_in_for):
            return wl
    return WORKLOADS.get(DEFAULT_WORKLOAD)


register(Workload(
    name="mlp-digits", stands_in_for=(), batch_size=64, make_data=datasets.digits,
    make_model=lambda d: models.MLP(d.x_train.shape[1], 128, d.n_classes),
    make_optimizer=lambda m: Adam(m.parameters(), lr=3e-3),
    make_scheduler=lambda o: StepLR(o, step_size=500, gamma=0.5),
))
register(Workload(
    name="cnn-digits", stands_in_for=("resnet", "vgg", "vit", "efficientnet", "mobilenet", "convnext"),
    batch_size=64, make_data=datasets.digits,
    make_model=lambda d: models.SmallCNN(d.n_classes),
    make_optimizer=lambda m: SGD(m.parameters(), lr=0.05, momentum=0.9),
    make_scheduler=lambda o: StepLR(o, step_size=500, gamma=0.5),
))
register(Workload(
    name="char-transformer",
    stands_in_for=("bert", "gpt", "llama", "t5", "opt", "mistral", "falcon", "roberta"),
    batch_size=32, make_data=datasets.text,
    make_model=lambda d: models.CharTransformer(d.n_classes, d.x_train.shape[1]),
    make_optimizer=lambda m: AdamW(m.parameters(), lr=3e-3, weight_decay=0.01),
    make_scheduler=lambda o: LinearLR(o, start_factor=0.1, total_iters=50),
))
