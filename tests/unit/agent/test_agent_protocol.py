"""The control plane refuses what it must, and changes nothing when it does."""

from __future__ import annotations

import json
import threading

import pytest

from testbed.agent.client import AgentClient, AgentError
from testbed.agent.protocol import RequestRefused, decode_body, decode_request
from testbed.agent.server import ControlServer

TOKEN = "t" * 32


def req(**kw) -> bytes:
    return json.dumps({"token": TOKEN, **kw}).encode()


@pytest.mark.parametrize(("line", "expected"), [
    (b"not json", "not JSON"),
    (b"[1, 2]", "not a JSON object"),
    (json.dumps({"cmd": "ping"}).encode(), "unauthenticated"),
    (json.dumps({"token": "wrong", "cmd": "ping"}).encode(), "unauthenticated"),
    (req(cmd="format_disk"), "unknown command"),
    (req(cmd="ping", extra=1), "unknown keys"),
    (req(cmd="start_job", args={"job_id": "j1", "family": "mlp", "seed": -1}), "args.seed"),
    (req(cmd="start_job", args={"job_id": "../etc", "family": "mlp", "seed": 1}), "args.job_id"),
    (req(cmd="send_checkpoint", args={"job_id": "j", "dst_addr": "evil.example", "dst_port": 1, "transfer_id": "x"}),
     "args.dst_addr"),
    (req(cmd="status", args={"job_id": "j", "sudo": True}), "args.sudo"),
])
def test_refusals(line, expected):
    with pytest.raises(RequestRefused, match=expected):
        decode_request(line, TOKEN)


@pytest.mark.parametrize(("body", "expected"), [
    (b"[" * 100_000 + b"]" * 100_000, "nested deeper than 32"),
    (json.dumps({"cmd": "ping", "args": {"a": [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]}}).encode(),
     "nested deeper"),
    (b" " * ((1 << 20) + 1), "request too large"),
    (b'{"cmd": "ping", "args": [1]}', "args: must be a JSON object"),
    (json.dumps({"token": TOKEN, "cmd": "ping"}).encode(), "unknown keys"),  # the token is not a body field
    (json.dumps({"cmd": ["ping"]}).encode(), "unknown command 'list'"),
])
def test_body_refusals(body, expected):
    with pytest.raises(RequestRefused, match=expected):
        decode_body(body)


def test_deep_request_is_refused_before_the_token_is_looked_at():
    with pytest.raises(RequestRefused, match="nested deeper"):
        decode_request(b'{"token": "' + TOKEN.encode() + b'", "x": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", TOKEN)


def test_valid_request():
    cmd, args = decode_request(req(cmd="start_job", args={"job_id": "j1", "family": "mlp-digits", "seed": 3}), TOKEN)
    assert cmd == "start_job" and args.seed == 3 and args.steps_per_s == 5.0


def test_server_answers_errors_and_keeps_state():
    calls = []
    handlers = {"ping": lambda a: {"pong": True}, "start_job": lambda a: calls.append(a.job_id) or {"started": a.job_id}}
    srv = ControlServer("127.0.0.1", 0, TOKEN, handlers)
    th = threading.Thread(target=srv.serve_forever, daemon=True)
    th.start()
    try:
        good = AgentClient("127.0.0.1", srv.port, TOKEN)
        bad = AgentClient("127.0.0.1", srv.port, "intruder")
        assert good.call("ping") == {"pong": True}
        with pytest.raises(AgentError, match="unauthenticated"):
            bad.call("start_job", job_id="j9", family="mlp", seed=1)
        with pytest.raises(AgentError, match="args.seed"):
            good.call("start_job", job_id="j2", family="mlp", seed="many")
        assert calls == []  # nothing refused reached a handler
        assert good.call("start_job", job_id="j1", family="mlp", seed=1) == {"started": "j1"}
        assert calls == ["j1"]
        with pytest.raises(AgentError, match="not supported"):
            good.call("resume", job_id="j1")
        good.close()
        bad.close()
    finally:
        srv.stop()
