"""How fast a workload trains here, and how large its checkpoint is."""

from __future__ import annotations

import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch

from testbed.nodes import checkpoint
from testbed.nodes.job import TrainingJob


@dataclass(frozen=True)
class Throughput:
    """``steps`` optimizer steps in ``seconds`` of wall time (after ``warmup_steps`` untimed ones)."""

    family: str
    workload: str
    device: str
    threads: int
    batch_size: int
    steps: int
    seconds: float
    steps_per_s: float
    samples_per_s: float

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def measure_throughput(family: str, seconds: float = 2.0, *, seed: int = 0, device: torch.device | str | None = None,
                       warmup_steps: int = 5) -> Throughput:
    """Train a fresh job for about ``seconds`` (at least one step) and time it."""
    if seconds <= 0:
        raise ValueError(f"seconds must be > 0 (got {seconds})")
    job = TrainingJob.create(family, seed, device=device)
    job.run(warmup_steps)
    _sync(job.device)
    steps, t0 = 0, time.perf_counter()
    while True:
        job.step()
        steps += 1
        if steps % 10 == 0 or steps == 1:
            _sync(job.device)
            elapsed = time.perf_counter() - t0
            if elapsed >= seconds:
                break
    rate = steps / elapsed
    return Throughput(family, job.workload.name, str(job.device), torch.get_num_threads(), job.batch_size, steps,
                      elapsed, rate, rate * job.batch_size)


def measure_steps_per_s(family: str, seconds: float = 2.0, **kwargs: Any) -> float:
    return measure_throughput(family, seconds, **kwargs).steps_per_s


def checkpoint_size_bytes(family: str, *, seed: int = 0, steps: int = 1,
                          device: torch.device | str | None = None) -> int:
    """The file size after ``steps`` steps (at least one, so the optimizer's state exists). It then
    grows only by the loss history, 8 bytes per step."""
    job = TrainingJob.create(family, seed, device=device)
    job.run(max(1, steps))
    with tempfile.TemporaryDirectory(prefix="tb-ckpt-size-") as d:
        return checkpoint.save(job, Path(d) / "size.pt", fsync=False).size_bytes


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)
