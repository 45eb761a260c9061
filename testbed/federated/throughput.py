"""Compute speed from measurement: how many training samples per second this machine trains at.

With ``federated.compute.samples_per_s: measured``, the study measures it once per run, before any
policy runs, in one of two ways (``compute.measured_model``):

- ``study``: the study's own model (the one FedAvg trains for accuracy), through the same
  local-training code path;
- ``update_sized``: a stand-in MLP whose parameters fill the scenario's ``update_gb`` (float32),
  trained with the scenario's batch size: how fast a model that big trains here. The small real
  model gives the accuracy; this one gives the time a model of the declared size takes.

Both are timed in **CPU time of one thread** (``torch`` limited to one thread while measuring,
``time.thread_time``): time other processes take on a shared machine is not counted, so the
number describes the work, not the machine's load at that moment (wall time under a load of 7 on
2 cores read 10x slower here; CPU time did not move). One reference node is one core of this
machine.

This machine then stands for one reference node (speed 1.0) at full power, and a site's compute
time is ``local_epochs x n_i x data_scale / (measured x C_i)``, where ``C_i`` comes from the power
profile at the site's cap. The value goes into each policy's summary (``samples_per_s``) and into
the manifest with how it was measured. It still varies a little between runs and machines, so a
run with ``measured`` is not bit-for-bit repeatable. A declared number is.
"""

from __future__ import annotations

import contextlib
import math
import time
from dataclasses import dataclass

import torch

from testbed.federated import fedavg
from testbed.nodes.datasets import Data

MEASURE_SECONDS = 1.0
WARMUP_SAMPLES = 64
UPDATE_SIZED_SECONDS = 3.0   # a 1 GB stand-in takes about 1.5 CPU-seconds a step here: time several
MIN_STEPS = 3


@contextlib.contextmanager
def one_thread():
    """torch on one thread while measuring (restored after): the thread's CPU time is then the work's."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def measure_samples_per_s(data: Data, training, *, seed: int, seconds: float = MEASURE_SECONDS) -> float:
    """Samples per CPU-second (one thread) of ``training`` (model, hidden, batch size, lr, momentum)
    on ``data``'s training set: whole epochs of :func:`fedavg.local_train` until at least
    ``seconds`` of CPU time have passed, after an untimed warm-up."""
    if not seconds > 0:
        raise ValueError(f"seconds must be > 0 (got {seconds})")
    model = fedavg.make_model(training.model, hidden=training.hidden, n_classes=data.n_classes, seed=seed)
    start = fedavg.clone_state(model)
    kw = dict(batch_size=training.batch_size, lr=training.lr, momentum=training.momentum, seed=seed)
    with one_thread():
        fedavg.local_train(model, start, data.x_train[:WARMUP_SAMPLES], data.y_train[:WARMUP_SAMPLES], epochs=1, **kw)
        samples, t0 = 0, time.thread_time()
        while True:
            fedavg.local_train(model, start, data.x_train, data.y_train, epochs=1, **kw)
            samples += data.n_train
            elapsed = time.thread_time() - t0
            if elapsed >= seconds:
                return samples / elapsed


MAX_MEASURED_UPDATE_GB = 1.0
"""Largest stand-in measured for real: a bigger update size is measured at this size and its rate
scaled by ``size / update_gb`` (training FLOPs per sample grow with the parameter count); the
manifest says so."""
UPDATE_SIZED_LAYERS = 4   # square hidden layers: they hold nearly all the parameters
BYTES_PER_PARAM = 4


@dataclass(frozen=True)
class UpdateSizedRate:
    """Samples per second of a stand-in model whose update is ``update_gb`` (see
    :func:`measure_update_sized_samples_per_s`)."""

    samples_per_s: float
    measured_gb: float       # the size of the stand-in that actually trained here
    measured_samples_per_s: float
    params: int
    steps: int

    def describe(self) -> str:
        scaled = "" if self.samples_per_s == self.measured_samples_per_s else f", scaled by {self.measured_gb:g} GB / update size"
        return (f"measured on this machine (CPU time, one thread): a {self.params / 1e6:.0f} M-parameter "
                f"({self.measured_gb:g} GB) MLP, fastest of {self.steps} steps: {self.measured_samples_per_s:.3g} samples/s{scaled}")


def update_sized_model(update_gb: float, n_features: int, n_classes: int, seed: int) -> torch.nn.Module:
    """An MLP with ``UPDATE_SIZED_LAYERS`` square hidden layers whose parameters fill ``update_gb``
    (float32): the stand-in for the model the scenario's update size describes."""
    params = update_gb * 1e9 / BYTES_PER_PARAM
    width = max(8, int(math.sqrt(params / UPDATE_SIZED_LAYERS)))
    torch.manual_seed(seed)
    layers: list[torch.nn.Module] = [torch.nn.Linear(n_features, width), torch.nn.ReLU()]
    for _ in range(UPDATE_SIZED_LAYERS):
        layers += [torch.nn.Linear(width, width), torch.nn.ReLU()]
    layers.append(torch.nn.Linear(width, n_classes))
    return torch.nn.Sequential(*layers)


def measure_update_sized_samples_per_s(update_gb: float, data: Data, training, *, seed: int,
                                       seconds: float = UPDATE_SIZED_SECONDS) -> UpdateSizedRate:
    """Training samples per second of a model whose update is ``update_gb`` on this machine: SGD
    steps of the scenario's batch size on real samples of ``data`` (forward, backward, update),
    after one untimed warm-up step, each step timed in CPU time of one thread until ``seconds``
    of it have passed (at least ``MIN_STEPS``); the rate is the fastest step's (cache and memory
    contention from other processes can still only slow a step down).
    Above ``MAX_MEASURED_UPDATE_GB`` the stand-in is that size and the rate is scaled by
    ``MAX_MEASURED_UPDATE_GB / update_gb``."""
    if not update_gb > 0:
        raise ValueError(f"update_gb must be > 0 (got {update_gb})")
    if not seconds > 0:
        raise ValueError(f"seconds must be > 0 (got {seconds})")
    size = min(update_gb, MAX_MEASURED_UPDATE_GB)
    model = update_sized_model(size, data.x_train.shape[1], data.n_classes, seed)
    params = sum(p.numel() for p in model.parameters())
    opt = torch.optim.SGD(model.parameters(), lr=training.lr, momentum=training.momentum)
    b = min(training.batch_size, data.n_train)
    x = data.x_train[:b].reshape(b, -1).float()
    y = data.y_train[:b]

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()

    durations: list[float] = []
    with one_thread():
        step()
        t0 = time.thread_time()
        while True:
            t = time.thread_time()
            step()
            durations.append(time.thread_time() - t)
            if time.thread_time() - t0 >= seconds and len(durations) >= MIN_STEPS:
                break
    steps = len(durations)
    rate = b / min(durations)
    del model, opt
    return UpdateSizedRate(samples_per_s=rate * size / update_gb, measured_gb=size, measured_samples_per_s=rate,
                           params=params, steps=steps)
