"""What the typed agent client (:class:`testbed.agent.client.AgentClient`) returns: one value per
kind of answer in :mod:`testbed.agent.protocol`. An answer missing a field is an
:class:`~testbed.agent.client.AgentError` naming the command and the field, never a ``KeyError``."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any


class MissingField(Exception):
    """An answer lacks a field its command promises (the client turns it into an AgentError)."""


def _need(answer: dict[str, Any], key: str) -> Any:
    if key not in answer:
        raise MissingField(key)
    return answer[key]


def _every_field(cls, answer: dict[str, Any]):
    """``cls`` (a dataclass) from an answer that must carry every one of its fields, in field order."""
    return cls(*(_need(answer, f.name) for f in fields(cls)))


@dataclass(frozen=True)
class JobStatus:
    """A job's state at its agent (``start_job``, ``status``, ``resume``)."""

    steps: int
    paused: bool
    done: bool
    error: str | None
    throughput_frac: float
    throttle: str | None

    @classmethod
    def parse(cls, a: dict[str, Any]) -> "JobStatus":
        return cls(_need(a, "steps"), _need(a, "paused"), _need(a, "done"), a.get("error"),
                   _need(a, "throughput_frac"), a.get("throttle"))


@dataclass(frozen=True)
class AgentInfo:
    """``ping``: the agent's site and the state of every job it holds."""

    site: str
    jobs: dict[str, JobStatus]

    @classmethod
    def parse(cls, a: dict[str, Any]) -> "AgentInfo":
        return cls(_need(a, "site"), {j: JobStatus.parse(s) for j, s in _need(a, "jobs").items()})


@dataclass(frozen=True)
class Checkpoint:
    """``checkpoint_and_pause``: the paused job's checkpoint file at the source."""

    path: str
    size_bytes: int
    sha256: str
    step: int
    t_checkpoint_s: float  # pause + save
    t_pause_s: float  # stopping the training loop
    t_save_s: float  # serialise, hash, write, fsync

    @classmethod
    def parse(cls, a: dict[str, Any]) -> "Checkpoint":
        return _every_field(cls, a)


@dataclass(frozen=True)
class CheckpointSent:
    """``send_checkpoint``: the transfer's report (``TransferReport.to_dict()``) and what it carried."""

    report: dict[str, Any]
    checkpoint_bytes: int
    ballast_bytes: int
    t_ballast_save_s: float  # writing the ballast to a file (fsync) before sending it
    save_top_up: dict[str, Any]  # disk_io.IoTiming.to_dict(): the save sample's top-up and per-file part

    @classmethod
    def parse(cls, a: dict[str, Any]) -> "CheckpointSent":
        return _every_field(cls, a)


@dataclass(frozen=True)
class Resumed:
    """``load_and_resume``: the checkpoint was verified and loaded; training resumed at ``step``."""

    t_load_s: float  # all of the below
    step: int
    bytes_read: int  # the received file: checkpoint + ballast
    t_persist_s: float  # fsync of the received file
    t_read_s: float  # reading it back from the device
    t_deserialize_s: float  # SHA-256 check + torch.load of the checkpoint
    t_restore_s: float  # building the job from the state and resuming it
    load_top_up: dict[str, Any]  # disk_io.IoTiming.to_dict(): the load sample's top-up and per-file part

    @classmethod
    def parse(cls, a: dict[str, Any]) -> "Resumed":
        return _every_field(cls, a)


@dataclass(frozen=True)
class ThroughputSet:
    """``set_throughput``: the fraction the job now trains at and the throttle that holds it
    (``details``: the whole answer, e.g. the CPU quota written)."""

    frac: float
    throttle: str
    throttle_reason: str
    details: dict[str, Any]

    @classmethod
    def parse(cls, a: dict[str, Any], asked_frac: float) -> "ThroughputSet":
        return cls(float(a.get("frac", asked_frac)), str(a.get("throttle", "")), str(a.get("throttle_reason", "")),
                   dict(a))
