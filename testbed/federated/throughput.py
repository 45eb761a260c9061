"""Compute speed from measurement: how many training samples per second this machine's CPU trains
the study's model at, through the same code path FedAvg's local training uses.

With ``federated.compute.samples_per_s: measured``, the study measures it once per run, before any
policy runs. This machine then stands for one reference node (speed 1.0) at full power, and a
site's compute time is ``local_epochs x n_i x data_scale / (measured x C_i)``, where ``C_i`` comes
from the power profile at the site's cap. The value goes into each policy's summary
(``samples_per_s``) and into the manifest. The timing varies with the machine and its load, so a
run with ``measured`` is not bit-for-bit repeatable. A declared number is.
"""

from __future__ import annotations

import time

from testbed.federated import fedavg
from testbed.nodes.datasets import Data

MEASURE_SECONDS = 1.0
WARMUP_SAMPLES = 64


def measure_samples_per_s(data: Data, training, *, seed: int, seconds: float = MEASURE_SECONDS) -> float:
    """Samples per second of ``training`` (model, hidden, batch size, lr, momentum) on ``data``'s
    training set: whole epochs of :func:`fedavg.local_train` until at least ``seconds`` have
    passed, after an untimed warm-up."""
    if not seconds > 0:
        raise ValueError(f"seconds must be > 0 (got {seconds})")
    model = fedavg.make_model(training.model, hidden=training.hidden, n_classes=data.n_classes, seed=seed)
    start = fedavg.clone_state(model)
    kw = dict(batch_size=training.batch_size, lr=training.lr, momentum=training.momentum, seed=seed)
    fedavg.local_train(model, start, data.x_train[:WARMUP_SAMPLES], data.y_train[:WARMUP_SAMPLES], epochs=1, **kw)
    samples, t0 = 0, time.perf_counter()
    while True:
        fedavg.local_train(model, start, data.x_train, data.y_train, epochs=1, **kw)
        samples += data.n_train
        elapsed = time.perf_counter() - t0
        if elapsed >= seconds:
            return samples / elapsed
