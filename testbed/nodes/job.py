"""A real PyTorch training job whose whole state can be taken out and put back bit for bit.

State = model + optimizer + LR scheduler + the job's own RNG state (:mod:`testbed.nodes.rng`) + the
data-loader position + step counter + loss history. The data order is a pure function of the job
seed: epoch ``e`` visits the training set in the order ``torch.randperm(n)`` drawn from a CPU
``torch.Generator`` seeded with ``derive_seed(data_seed, e)``, ``data_seed = derive_seed(seed,
"nodes", "data")`` (the same order on CPU and CUDA), in mini-batches of the workload's batch size; the last partial batch of an epoch is
dropped. So the loader's position is just ``(epoch, index)``: ``index`` is the first sample of the
next batch within the epoch's permutation.

:meth:`TrainingJob.create` calls :func:`testbed.nodes.determinism.configure` (process-global: one
thread, deterministic algorithms).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

from testbed.nodes import determinism, workloads
from testbed.nodes.models import n_params
from testbed.nodes.rng import RngState
from testbed.nodes.workloads import Workload
from testbed.seeding import derive_seed


@dataclass(frozen=True)
class Position:
    """Where the data loader is: ``index`` is the next sample's offset in epoch ``epoch``'s order."""

    epoch: int
    index: int


@dataclass(frozen=True)
class Evaluation:
    """On the held-out split: mean cross-entropy and accuracy (per token for language models)."""

    test_loss: float
    accuracy: float
    n_test: int


class TrainingJob:
    """A job's real training inside a node agent (model, data, optimizer, checkpoints).

    ``family`` is the scenario's family string (e.g. ``llama-7b``); ``workload`` is its stand-in."""

    def __init__(self, workload: Workload, seed: int, *, family: str | None = None,
                 device: torch.device | str | None = None, model_mb: float | None = None):
        self.workload = workload
        self.family = family or workload.name
        self.seed = int(seed)
        self.model_mb = None if model_mb is None else float(model_mb)
        self.device = workloads.resolve_device(device)
        self.model, self.optimizer, self.scheduler, self.data = workload.build(self.seed, self.device, self.model_mb)
        self.batch_size = workload.batch_size
        self.batches_per_epoch = self.data.n_train // self.batch_size
        if self.batches_per_epoch < 1:
            raise ValueError(f"{workload.name}: {self.data.n_train} training samples < batch {self.batch_size}")
        self.rng = RngState.seeded(self.seed, self.device)
        self.steps_done = 0
        self.loss_history: list[float] = []
        self._epoch, self._index = 0, 0
        self._perm: tuple[int, torch.Tensor] | None = None

    @classmethod
    def create(cls, family: str, seed: int, device: torch.device | str | None = None,
               threads: int = determinism.DEFAULT_THREADS, model_mb: float | None = None) -> TrainingJob:
        """A fresh job for a scenario family (see :func:`testbed.nodes.workloads.for_family`);
        ``model_mb``: its model grown to that many MB of parameters (real checkpoints of GBs)."""
        determinism.configure(threads)
        return cls(workloads.for_family(family), seed, family=family, device=device, model_mb=model_mb)

    @property
    def position(self) -> Position:
        return Position(self._epoch, self._index)

    @property
    def data_seed(self) -> int:
        """The base of every epoch's permutation seed."""
        return derive_seed(self.seed, "nodes", "data")

    def permutation(self, epoch: int) -> torch.Tensor:
        g = torch.Generator().manual_seed(derive_seed(self.data_seed, epoch))
        return torch.randperm(self.data.n_train, generator=g)

    def _batch_indices(self) -> torch.Tensor:
        if self._perm is None or self._perm[0] != self._epoch:
            self._perm = (self._epoch, self.permutation(self._epoch).to(self.device))
        return self._perm[1][self._index:self._index + self.batch_size]

    def step(self) -> float:
        """One optimizer step on the next mini-batch; returns its training loss."""
        idx = self._batch_indices()
        with self.rng.active(self.device):
            self.model.train()
            logits = self.model(self.data.x_train[idx])
            loss = _loss(logits, self.data.y_train[idx])
            self.optimizer.zero_grad(set_to_none=True)
            loss.backward()
            self.optimizer.step()
            self.scheduler.step()
        value = float(loss.item())
        self.steps_done += 1
        self.loss_history.append(value)
        self._index += self.batch_size
        if self._index >= self.batches_per_epoch * self.batch_size:
            self._epoch, self._index = self._epoch + 1, 0
        return value

    def run(self, n_steps: int) -> list[float]:
        return [self.step() for _ in range(n_steps)]

    @torch.no_grad()
    def evaluate(self) -> Evaluation:
        """Loss and accuracy on the test split. Uses no randomness and leaves the training state as it was."""
        was_training = self.model.training
        self.model.eval()
        try:
            logits = self.model(self.data.x_test)
            y = self.data.y_test
            acc = (logits.argmax(dim=-1) == y).double().mean()
            return Evaluation(float(_loss(logits, y)), float(acc), int(y.shape[0]))
        finally:
            self.model.train(was_training)

    @property
    def n_params(self) -> int:
        return n_params(self.model)

    def params_sha256(self) -> str:
        """SHA-256 over every parameter and buffer (name, dtype, shape, bytes): equal iff bit-identical."""
        h = hashlib.sha256()
        for name, t in self.model.state_dict().items():
            h.update(f"{name}:{t.dtype}:{tuple(t.shape)}".encode())
            h.update(t.detach().cpu().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes())
        return h.hexdigest()

    def state_dict(self) -> dict[str, Any]:
        """Everything needed to continue bit for bit, as tensors and plain Python values only."""
        return {
            "family": self.family,
            "workload": self.workload.name,
            "seed": self.seed,
            "model_mb": self.model_mb,
            "steps_done": self.steps_done,
            "position": {"epoch": self._epoch, "index": self._index, "data_seed": self.data_seed},
            "batch_size": self.batch_size,
            "data_fingerprint": self.data.fingerprint,
            "model": self.model.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "scheduler": self.scheduler.state_dict(),
            "rng": self.rng.to_plain(),
            "loss_history": torch.tensor(self.loss_history, dtype=torch.float64),
            "torch_version": str(torch.__version__),
            "device_type": self.device.type,
            "threads": torch.get_num_threads(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Inverse of :meth:`state_dict` on a job built for the same workload and seed. Raises
        ``ValueError`` on a mismatch (checked before anything is changed)."""
        checks = [("workload", self.workload.name), ("seed", self.seed), ("batch_size", self.batch_size),
                  ("data_fingerprint", self.data.fingerprint), ("model_mb", self.model_mb)]
        for key, want in checks:
            if state.get(key) != want:
                raise ValueError(f"{key} is {state[key]!r}, this job has {want!r}")
        pos = state["position"]
        if pos["data_seed"] != self.data_seed:
            raise ValueError(f"position.data_seed is {pos['data_seed']}, this job has {self.data_seed}")
        epoch, index = int(pos["epoch"]), int(pos["index"])
        if epoch < 0 or index < 0 or index % self.batch_size or index >= self.batches_per_epoch * self.batch_size:
            raise ValueError(f"position ({epoch}, {index}) is not a batch boundary of this job")
        history = state["loss_history"]
        if history.dtype != torch.float64 or history.dim() != 1 or len(history) != state["steps_done"]:
            raise ValueError(f"loss_history ({history.dtype}, {tuple(history.shape)}) does not match "
                             f"steps_done={state['steps_done']}")
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.scheduler.load_state_dict(state["scheduler"])
        self.rng = RngState.from_plain(state["rng"], self.device)
        self.steps_done = int(state["steps_done"])
        self.loss_history = history.tolist()
        self._epoch, self._index = epoch, index
        self._perm = None


def _loss(logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
