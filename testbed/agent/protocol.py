"""The control-plane protocol between the controller and node agents.

One request per line, one response per line, JSON, over TCP on the *management* network only:

    request:  {"token": "<per-run token>", "cmd": "<command>", "args": {...}}
    response: {"ok": true, "result": {...}}  |  {"ok": false, "error": "<what was wrong>"}

The token is compared in constant time before anything else is looked at. Every command's
arguments are validated by a pydantic model; a malformed or unauthenticated request gets an
error and changes nothing.
"""

from __future__ import annotations

import hmac
import json
from typing import Any, Callable

from pydantic import BaseModel, ConfigDict, Field, ValidationError

MAX_LINE_BYTES = 1 << 20
JOB_ID = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$"


class _Args(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class NoArgs(_Args):
    pass


class JobArgs(_Args):
    job_id: str = Field(pattern=JOB_ID)


class StartJob(JobArgs):
    family: str = Field(min_length=1, max_length=64)
    seed: int = Field(ge=0)
    max_steps: int | None = Field(None, ge=1, description="Stop training after this many steps in total.")
    steps_per_s: float = Field(5.0, gt=0, le=10_000, description="Pace of training (keeps CPU for the network).")


class SendCheckpoint(JobArgs):
    dst_addr: str = Field(pattern=r"^\d{1,3}(\.\d{1,3}){3}$")
    dst_port: int = Field(ge=1, le=65535)
    ballast_bytes: int = Field(0, ge=0, le=1 << 40)
    transfer_id: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
    deadline_s: float | None = Field(None, gt=0)


class LoadAndResume(JobArgs):
    transfer_id: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$", description="SHA-256 of the checkpoint file (not the ballast).")
    steps_per_s: float = Field(5.0, gt=0, le=10_000)
    max_steps: int | None = Field(None, ge=1)


class SetThroughput(JobArgs):
    frac: float = Field(gt=0, le=1, description="Train at this fraction of the job's reference pace.")
    cap_w: float | None = Field(None, ge=0, description="The emulated power cap behind frac (recorded only).")


COMMANDS: dict[str, type[_Args]] = {
    "ping": NoArgs,
    "start_job": StartJob,
    "status": JobArgs,
    "losses": JobArgs,
    "checkpoint_and_pause": JobArgs,
    "send_checkpoint": SendCheckpoint,
    "load_and_resume": LoadAndResume,
    "resume": JobArgs,
    "free": JobArgs,
    "set_throughput": SetThroughput,
}


class ProtocolError(Exception):
    """A request the agent refuses; the message goes back to the caller."""


def decode_request(line: bytes, token: str) -> tuple[str, _Args]:
    """Parse, authenticate and validate one request line. Raises ProtocolError."""
    if len(line) > MAX_LINE_BYTES:
        raise ProtocolError("request too large")
    try:
        msg = json.loads(line)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ProtocolError(f"malformed request: not JSON ({e.__class__.__name__})") from None
    if not isinstance(msg, dict):
        raise ProtocolError("malformed request: not a JSON object")
    given = msg.get("token")
    if not isinstance(given, str) or not hmac.compare_digest(given.encode(), token.encode()):
        raise ProtocolError("unauthenticated: bad or missing token")
    cmd = msg.get("cmd")
    if cmd not in COMMANDS:
        raise ProtocolError(f"unknown command {cmd!r} (known: {sorted(COMMANDS)})")
    extra = set(msg) - {"token", "cmd", "args"}
    if extra:
        raise ProtocolError(f"malformed request: unknown keys {sorted(extra)}")
    try:
        args = COMMANDS[cmd].model_validate(msg.get("args") or {})
    except ValidationError as e:
        first = e.errors(include_url=False)[0]
        where = ".".join(str(x) for x in first["loc"]) or "args"
        raise ProtocolError(f"{cmd}: args.{where}: {first['msg']}") from None
    return cmd, args


def encode(obj: dict[str, Any]) -> bytes:
    return (json.dumps(obj, separators=(",", ":"), sort_keys=True) + "\n").encode()


def ok(result: dict[str, Any] | None = None) -> bytes:
    return encode({"ok": True, "result": result or {}})


def error(message: str) -> bytes:
    return encode({"ok": False, "error": message})


Handler = Callable[[_Args], dict[str, Any]]
