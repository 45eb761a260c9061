"""Save a :class:`~testbed.nodes.job.TrainingJob` to one file and load it back, bit for bit.

File format (``FORMAT``, ``VERSION``): a plain dict written by ``torch.save``::

    {"format": "testbed.nodes.checkpoint", "version": 1,
     "content_sha256": <state_sha256(state)>, "state": <TrainingJob.state_dict()>}

It holds tensors and plain Python values only, so it is read with ``torch.load(weights_only=True)``
(no arbitrary objects are unpickled). The state holds the model, optimizer and LR-scheduler state
dicts, the job's RNG state (torch CPU, CUDA where the job ran on CUDA, Python ``random``, NumPy),
the data-loader position (epoch, index, permutation seed), the step counter, the loss history
(float64, 8 bytes per step), and the family, workload, seed, data fingerprint, torch version,
device type and thread count. The bytes are a pure function of the state: the same state saved
twice gives the same SHA-256.

Writes are atomic: the bytes go to a temporary file in the target directory, are fsynced, and are
renamed over ``path``; a reader never sees a partial checkpoint, and a crash leaves at most a
``.<name>.tmp-<pid>`` file. Every problem on load -- missing, truncated, corrupted, another format
or version, a mismatching SHA-256 -- raises :class:`~testbed.nodes.errors.CheckpointError` naming
the file.
"""

from __future__ import annotations

import hashlib
import io
import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch

from testbed.nodes import determinism, workloads
from testbed.nodes.errors import CheckpointError
from testbed.nodes.job import TrainingJob
from testbed.nodes.models import MAX_MODEL_MB
from testbed.nodes.state_digest import state_sha256

FORMAT = "testbed.nodes.checkpoint"
VERSION = 1
STATE_KEYS = ("family", "workload", "seed", "steps_done", "position", "batch_size", "data_fingerprint", "model",
              "optimizer", "scheduler", "rng", "loss_history", "torch_version", "device_type", "threads")
RNG_KEYS = ("torch_cpu", "torch_cuda", "cuda_index", "python", "numpy")
POSITION_KEYS = ("epoch", "index", "data_seed")


@dataclass(frozen=True)
class CheckpointInfo:
    """``size_bytes`` is the file's true size; ``sha256`` the plain SHA-256 of its bytes (what
    ``sha256sum`` prints and the transfer service verifies); ``t_save_s`` the wall time from taking
    the state to the rename (serialise, hash, write, fsync)."""

    path: str
    size_bytes: int
    sha256: str
    t_save_s: float
    step: int
    family: str
    workload: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def to_bytes(job: TrainingJob) -> bytes:
    """The checkpoint file's bytes, without writing them anywhere."""
    state = job.state_dict()
    doc = {"format": FORMAT, "version": VERSION, "content_sha256": state_sha256(state), "state": state}
    buf = io.BytesIO()
    torch.save(doc, buf)
    return buf.getvalue()


def save(job: TrainingJob, path: str | Path, *, fsync: bool = True) -> CheckpointInfo:
    t0 = time.perf_counter()
    path = Path(path)
    data = to_bytes(job)
    digest = hashlib.sha256(data).hexdigest()
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            if fsync:
                os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    if fsync:
        _fsync_dir(path.parent)
    return CheckpointInfo(str(path), len(data), digest, time.perf_counter() - t0, job.steps_done, job.family,
                          job.workload.name)


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def read_state(path: str | Path, *, expect_sha256: str | None = None) -> dict[str, Any]:
    """The verified state dict of a checkpoint (tensors on the CPU), without building a job."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as e:
        raise CheckpointError(path, f"cannot read: {e.strerror or e}") from e
    return state_from_bytes(data, path, expect_sha256=expect_sha256)


def state_from_bytes(data: bytes, path: str | Path, *, expect_sha256: str | None = None) -> dict[str, Any]:
    """The verified state dict of a checkpoint file's bytes already read (``path`` names it in errors):
    SHA-256 check, ``torch.load`` (deserialisation), format and content check."""
    path = Path(path)
    if expect_sha256 is not None and hashlib.sha256(data).hexdigest() != expect_sha256.lower():
        raise CheckpointError(path, f"SHA-256 of the file is not the expected {expect_sha256}")
    try:
        doc = torch.load(io.BytesIO(data), map_location="cpu", weights_only=True)
    except Exception as e:  # torch raises RuntimeError, UnpicklingError, ValueError, EOFError, ... here
        raise CheckpointError(path, f"not a readable checkpoint ({len(data)} bytes; truncated or corrupted?): "
                                    f"{type(e).__name__}: {_first_line(e)}") from e
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise CheckpointError(path, f"not a {FORMAT} file")
    if doc.get("version") != VERSION:
        raise CheckpointError(path, f"format version {doc.get('version')!r} is not the supported {VERSION}")
    state = doc.get("state")
    _require(path, state, STATE_KEYS, "state")
    _require(path, state["rng"], RNG_KEYS, "state.rng")
    _require(path, state["position"], POSITION_KEYS, "state.position")
    try:
        content = state_sha256(state)
    except TypeError as e:
        raise CheckpointError(path, f"unexpected content: {e}") from e
    if content != doc.get("content_sha256"):
        raise CheckpointError(path, "content SHA-256 mismatch: the checkpoint is corrupted")
    return state


def _first_line(e: BaseException, limit: int = 200) -> str:
    lines = str(e).strip().splitlines()
    return lines[0][:limit] if lines else ""


def _require(path: Path, d: Any, keys: tuple[str, ...], where: str) -> None:
    if not isinstance(d, dict):
        raise CheckpointError(path, f"{where} is missing or not a dict")
    missing = [k for k in keys if k not in d]
    if missing:
        raise CheckpointError(path, f"{where} lacks {', '.join(missing)}")


def load(path: str | Path, *, device: torch.device | str | None = None, expect_sha256: str | None = None,
         threads: int = determinism.DEFAULT_THREADS) -> TrainingJob:
    """A job that continues exactly where the saved one stopped (on ``device``: default cuda if
    available, else cpu). Configures determinism for this process like :meth:`TrainingJob.create`."""
    return job_from_state(read_state(path, expect_sha256=expect_sha256), path, device=device, threads=threads)


def job_from_state(state: dict[str, Any], path: str | Path, *, device: torch.device | str | None = None,
                   threads: int = determinism.DEFAULT_THREADS) -> TrainingJob:
    """The job a verified state dict (:func:`read_state`, :func:`state_from_bytes`) restores."""
    path = Path(path)
    determinism.configure(threads)
    try:
        workload = workloads.get(state["workload"])
    except KeyError as e:
        raise CheckpointError(path, str(e.args[0])) from e
    model_mb = state.get("model_mb")
    if model_mb is not None and not (isinstance(model_mb, float) and 0 < model_mb <= MAX_MODEL_MB):
        raise CheckpointError(path, f"model_mb must be a number in (0, {MAX_MODEL_MB:g}] or absent")
    job = TrainingJob(workload, state["seed"], family=state["family"], device=device, model_mb=model_mb)
    try:
        job.load_state_dict(state)
    except (ValueError, KeyError, RuntimeError) as e:
        raise CheckpointError(path, f"does not fit a {workload.name} job: {e}") from e
    return job
