"""Process-wide settings that make training bit-exact (call :func:`configure` once in a job process).

- deterministic algorithms (``torch.set_deterministic_debug_mode("error")``, the documented
  alternative interface to ``torch.use_deterministic_algorithms(True)``; the latter also imports
  ``torch._inductor`` to flag its compiler, which costs 1.6 s per process and which we never use):
  an op without a deterministic kernel raises instead of silently varying; cuDNN benchmarking off
  and deterministic cuDNN kernels on.
- ``CUBLAS_WORKSPACE_CONFIG=:4096:8``: required for deterministic cuBLAS; it only takes effect if it
  is set before CUDA is first used in the process, so call :func:`configure` early.
- ``torch.set_num_threads(threads)`` (default 1): CPU kernels split reductions by thread count, so
  the same step with 1 and with 8 threads can differ in the last bit. A checkpoint is bit-identical
  after a resume only if both processes use the same thread count (and torch version and device
  type); one thread per job process is the simplest contract, and these models are small enough
  that it costs little. The thread count in use is recorded in every checkpoint.

The settings are process-global by nature, which is why a node agent should run each training job
in its own process.
"""

from __future__ import annotations

import os

import torch

DEFAULT_THREADS = 1


def configure(threads: int = DEFAULT_THREADS) -> None:
    """Idempotent. ``threads`` must be >= 1."""
    if threads < 1:
        raise ValueError(f"threads must be >= 1 (got {threads})")
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    if not torch.are_deterministic_algorithms_enabled() or torch.is_deterministic_algorithms_warn_only_enabled():
        torch.set_deterministic_debug_mode("error")
    torch.backends.cudnn.benchmark = False
    torch.backends.cudnn.deterministic = True
    if torch.get_num_threads() != threads:
        torch.set_num_threads(threads)
