"""The control-plane messages between the controller and node agents.

Over TCP on the *management* network only, in the wire format of :mod:`testbed.agent.wire`: the
connection is authenticated first (an HMAC of the per-run token over the agent's challenge, compared
in constant time before anything else is read), then each frame carries one JSON message:

    request:  {"cmd": "<command>", "args": {...}}
    response: {"ok": true, "result": {...}}  |  {"ok": false, "error": "<what was wrong>"}

A request's size and JSON nesting depth are bounded before it is decoded. Every command's
arguments are validated by a pydantic model; a malformed request gets an error and changes nothing.
"""

from __future__ import annotations

import hmac
import json
from typing import Any, Callable

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from testbed.agent.wire import MAX_JSON_DEPTH, MAX_REQUEST_BYTES, json_depth_exceeds
from testbed.spec.programs import Program

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
    program: Program | None = Field(None, description="A user's training program instead of the stand-in (testbed.userjob).")
    model_mb: float | None = Field(None, gt=0, le=100_000, description=(
        "Grow the stand-in model to this many MB of parameters (real checkpoints of GBs); default: its own size."))


class SendCheckpoint(JobArgs):
    dst_addr: str = Field(pattern=r"^\d{1,3}(\.\d{1,3}){3}$")
    dst_port: int = Field(ge=1, le=65535)
    ballast_bytes: int = Field(0, ge=0, le=1 << 40)
    transfer_id: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
    deadline_s: float | None = Field(None, gt=0)


class LoadAndResume(JobArgs):
    transfer_id: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$", description="SHA-256 of the checkpoint file (not the ballast).")
    checkpoint_bytes: int | None = Field(None, ge=1, le=1 << 40, description=(
        "Length of the checkpoint at the front of the received file (ballast follows); default: all of it."))
    steps_per_s: float = Field(5.0, gt=0, le=10_000)
    max_steps: int | None = Field(None, ge=1)
    program: Program | None = Field(None, description="The job is a user's program: it resumes from the checkpoint.")
    seed: int | None = Field(None, ge=0, description="The job's seed (a user program sees it again on resume).")


class SetThroughput(JobArgs):
    frac: float = Field(gt=0, le=1, description="Train at this fraction of the job's reference pace.")
    cap_w: float | None = Field(None, ge=0, description="The emulated power cap behind frac (recorded only).")


MAX_BATCH = 256  # set_throughputs: the most jobs one request may name


class SetThroughputs(_Args):
    items: list[SetThroughput] = Field(min_length=1, max_length=MAX_BATCH, description=(
        "set_throughput for several jobs in one round trip; each answered apart (one refused, the others still set)."))


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
    "set_throughputs": SetThroughputs,
}


class RequestRefused(Exception):
    """A request the agent refuses; the message goes back to the caller."""


def parse_json(data: bytes, max_bytes: int = MAX_REQUEST_BYTES) -> Any:
    """JSON text to a value, with its size and nesting depth bounded before it is decoded."""
    if len(data) > max_bytes:
        raise RequestRefused(f"request too large ({len(data)} bytes, at most {max_bytes})")
    if json_depth_exceeds(data, MAX_JSON_DEPTH):
        raise RequestRefused(f"malformed request: JSON nested deeper than {MAX_JSON_DEPTH} levels")
    try:
        return json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as e:
        raise RequestRefused(f"malformed request: not JSON ({e.__class__.__name__})") from None


def decode_body(body: bytes) -> tuple[str, _Args]:
    """Parse and validate one request from an authenticated connection. Raises RequestRefused."""
    msg = parse_json(body)
    if not isinstance(msg, dict):
        raise RequestRefused("malformed request: not a JSON object")
    return _validate(msg)


def decode_request(line: bytes, token: str) -> tuple[str, _Args]:
    """A self-contained request ``{"token": ..., "cmd": ..., "args": ...}`` (bounded parse, then
    the token in constant time, then the arguments). The agent itself authenticates connections
    instead (:mod:`testbed.agent.wire`) and decodes bodies with :func:`decode_body`."""
    msg = parse_json(line)
    if not isinstance(msg, dict):
        raise RequestRefused("malformed request: not a JSON object")
    given = msg.pop("token", None)
    if not isinstance(given, str) or not hmac.compare_digest(given.encode(), token.encode()):
        raise RequestRefused("unauthenticated: bad or missing token")
    return _validate(msg)


def _validate(msg: dict) -> tuple[str, _Args]:
    cmd = msg.get("cmd")
    if not isinstance(cmd, str) or cmd not in COMMANDS:
        shown = cmd if isinstance(cmd, str) and len(cmd) <= 64 else type(cmd).__name__
        raise RequestRefused(f"unknown command {shown!r} (known: {sorted(COMMANDS)})")
    extra = set(msg) - {"cmd", "args"}
    if extra:
        raise RequestRefused(f"malformed request: unknown keys {sorted(str(k)[:64] for k in extra)[:10]}")
    raw = msg.get("args") or {}
    if not isinstance(raw, dict):
        raise RequestRefused(f"{cmd}: args: must be a JSON object")
    try:
        args = COMMANDS[cmd].model_validate(raw)
    except ValidationError as e:
        first = e.errors(include_url=False)[0]
        where = ".".join(str(x) for x in first["loc"]) or "args"
        raise RequestRefused(f"{cmd}: args.{where}: {first['msg']}") from None
    return cmd, args


def encode(obj: dict[str, Any]) -> bytes:
    """One message's JSON body (framed by :func:`testbed.agent.wire.frame`)."""
    return json.dumps(obj, separators=(",", ":"), sort_keys=True).encode()


def ok(result: dict[str, Any] | None = None) -> bytes:
    return encode({"ok": True, "result": result or {}})


def error(message: str) -> bytes:
    return encode({"ok": False, "error": message})


Handler = Callable[[_Args], dict[str, Any]]
