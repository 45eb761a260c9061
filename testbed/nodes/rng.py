"""A job's own random-number state: torch (CPU and the job's CUDA device), Python ``random``, NumPy.

The generators these libraries use are process-global (``nn.Dropout`` has no generator argument).
A :class:`RngState` is swapped in around each training step (:meth:`RngState.active`) and swapped out
again afterwards, so a job's trajectory depends only on its own state -- not on other jobs, tests or
libraries in the same process -- and the state that goes into a checkpoint is exactly what the next
step will use.

:meth:`RngState.to_plain` turns it into tensors, ints and floats only, so a checkpoint loads with
``torch.load(..., weights_only=True)`` (no arbitrary pickled objects).

Two jobs may step in two threads of one process and each stays bit-exact: a step, seeding and model
initialisation hold :data:`GLOBAL_RNG_LOCK` while they use the global generators (so steps of
different jobs do not overlap). A single :class:`~testbed.nodes.job.TrainingJob` is not thread-safe:
do not save it while another thread steps it (pause first).
"""

from __future__ import annotations

import random
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from testbed.seeding import derive_seed

# The global generators are shared by all threads: two jobs stepping in two threads of one process
# would swap each other's state in and out. Whatever touches them (a step, seeding, model init) holds this.
GLOBAL_RNG_LOCK = threading.Lock()


@dataclass
class RngState:
    torch_cpu: torch.Tensor
    torch_cuda: torch.Tensor | None
    python: tuple
    numpy: tuple
    cuda_index: int | None = None  # the device torch_cuda belongs to

    @classmethod
    def capture(cls, device: torch.device) -> RngState:
        """The process-global state now."""
        idx = _cuda_index(device)
        cuda = torch.cuda.get_rng_state(idx) if idx is not None else None
        return cls(torch.get_rng_state(), cuda, random.getstate(), np.random.get_state(legacy=True), idx)

    def restore(self) -> None:
        """Make this the process-global state."""
        torch.set_rng_state(self.torch_cpu)
        if self.cuda_index is not None and self.torch_cuda is not None:
            torch.cuda.set_rng_state(self.torch_cuda, self.cuda_index)
        random.setstate(self.python)
        np.random.set_state(self.numpy)

    @classmethod
    def seeded(cls, seed: int, device: torch.device) -> RngState:
        """A fresh state derived from ``seed``; the process-global state is left as it was."""
        with GLOBAL_RNG_LOCK:
            saved = cls.capture(device)
            try:
                s = derive_seed(seed, "nodes", "train-rng")
                torch.manual_seed(s)  # seeds every CUDA device too
                random.seed(s)
                np.random.seed(s % 2**32)
                return cls.capture(device)
            finally:
                saved.restore()

    @contextmanager
    def active(self, device: torch.device) -> Iterator[None]:
        """Run the body on this state; afterwards this object holds the advanced state and the
        process-global state is back to what it was. Serialised across threads (see ``GLOBAL_RNG_LOCK``)."""
        with GLOBAL_RNG_LOCK:
            saved = RngState.capture(device)
            self.restore()
            try:
                yield
            finally:
                now = RngState.capture(device)
                self.torch_cpu, self.torch_cuda = now.torch_cpu, now.torch_cuda
                self.python, self.numpy = now.python, now.numpy
                saved.restore()

    def to_plain(self) -> dict[str, Any]:
        version, internal, gauss = self.python
        name, key, pos, has_gauss, cached = self.numpy
        return {
            "torch_cpu": self.torch_cpu.clone(),
            "torch_cuda": None if self.torch_cuda is None else self.torch_cuda.clone(),
            "cuda_index": self.cuda_index,
            "python": {"version": int(version), "internal": torch.tensor(internal, dtype=torch.int64),
                       "gauss": gauss},
            "numpy": {"name": str(name), "key": torch.from_numpy(key.astype(np.int64)), "pos": int(pos),
                      "has_gauss": int(has_gauss), "cached_gaussian": float(cached)},
        }

    @classmethod
    def from_plain(cls, d: dict[str, Any], device: torch.device) -> RngState:
        """Inverse of :meth:`to_plain`. The CUDA state is used only if the job runs on CUDA again
        (CPU and CUDA streams differ anyway; a CPU<->CUDA move is never bit-identical)."""
        py, nq = d["python"], d["numpy"]
        python = (py["version"], tuple(int(v) for v in py["internal"].tolist()), py["gauss"])
        numpy = (nq["name"], nq["key"].numpy().astype(np.uint32), nq["pos"], nq["has_gauss"], nq["cached_gaussian"])
        idx = _cuda_index(device)
        cuda = d["torch_cuda"] if idx is not None and d["torch_cuda"] is not None else None
        if idx is not None and cuda is None:  # came from a CPU run: derive a CUDA state from the CPU one
            cuda_seed = int.from_bytes(d["torch_cpu"][:8].numpy().tobytes(), "little") >> 1
            with torch.random.fork_rng(devices=[idx]):
                torch.cuda.manual_seed(cuda_seed)
                cuda = torch.cuda.get_rng_state(idx)
        return cls(d["torch_cpu"].clone(), cuda, python, numpy, idx)


def _cuda_index(device: torch.device) -> int | None:
    if device.type != "cuda":
        return None
    return device.index if device.index is not None else torch.cuda.current_device()
