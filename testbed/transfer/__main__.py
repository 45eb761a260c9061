"""``python -m testbed.transfer serve|send``: run a server or send one object (iperf-like manual use,
and a process to start inside a network namespace)."""

from __future__ import annotations

import argparse
import json
import secrets
import signal
import sys
import threading

from testbed.netguard.fdlimit import raise_fd_limit
from testbed.transfer.client import DEFAULT_CHUNK_BYTES, send
from testbed.transfer.server import TransferServer
from testbed.transfer.source import BallastSource, ConcatSource, FileSource


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m testbed.transfer", description=__doc__)
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("serve", help="receive transfers until SIGINT/SIGTERM")
    s.add_argument("--host", default="0.0.0.0")
    s.add_argument("--port", type=int, default=0)
    s.add_argument("--token", required=True)
    s.add_argument("--dir", default=None, help="storage directory (files); without it only discard is possible")
    s.add_argument("--no-fsync", action="store_true")
    c = sub.add_parser("send", help="send one object and print the report")
    c.add_argument("--host", required=True)
    c.add_argument("--port", type=int, required=True)
    c.add_argument("--token", required=True)
    c.add_argument("--file", default=None)
    c.add_argument("--ballast-bytes", type=int, default=0)
    c.add_argument("--seed", type=int, default=0)
    c.add_argument("--transfer-id", default=None)
    c.add_argument("--chunk-bytes", type=int, default=DEFAULT_CHUNK_BYTES)
    c.add_argument("--deadline-s", type=float, default=None)
    c.add_argument("--json", action="store_true", help="print the report as one JSON object")
    return p


def _serve(args) -> int:
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())

    raise_fd_limit()  # a flood then meets the server's own caps, not the process's descriptor limit

    def done(result) -> None:
        print(json.dumps({"event": "completed", **result.to_dict()}), flush=True)

    with TransferServer(args.host, args.port, token=args.token, storage_dir=args.dir, on_complete=done,
                        fsync=not args.no_fsync) as srv:
        print(json.dumps({"event": "listening", "host": args.host, "port": srv.port}), flush=True)
        stop.wait()
    return 0


def _send(args) -> int:
    parts = []
    if args.file:
        parts.append(FileSource(args.file))
    if args.ballast_bytes:
        parts.append(BallastSource(args.ballast_bytes, args.seed))
    if not parts:
        print("send: give --file and/or --ballast-bytes", file=sys.stderr)
        return 2
    source = parts[0] if len(parts) == 1 else ConcatSource(*parts)
    report = send(args.host, args.port, source, transfer_id=args.transfer_id or f"x-{secrets.token_hex(6)}",
                  token=args.token, chunk_bytes=args.chunk_bytes, deadline_s=args.deadline_s)
    print(json.dumps(report.to_dict()) if args.json else report.summary(), flush=True)
    return 0 if report.ok else 1


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    return _serve(args) if args.cmd == "serve" else _send(args)


if __name__ == "__main__":
    sys.exit(main())
