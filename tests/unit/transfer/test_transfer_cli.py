"""``python -m testbed.transfer serve|send`` as processes on loopback."""

from __future__ import annotations

import json
import subprocess
import sys

TOKEN = "cli-token"


def _serve(tmp_path):
    return subprocess.Popen([sys.executable, "-m", "testbed.transfer", "serve", "--host", "127.0.0.1", "--port", "0",
                             "--token", TOKEN, "--dir", str(tmp_path), "--no-fsync"],
                            stdout=subprocess.PIPE, text=True)


def _send(port, *args):
    return subprocess.run([sys.executable, "-m", "testbed.transfer", "send", "--host", "127.0.0.1", "--port", str(port),
                           "--token", TOKEN, *args], capture_output=True, text=True, timeout=60)


def test_cli_send_file_and_ballast(tmp_path):
    ckpt = tmp_path / "model.pt"
    ckpt.write_bytes(b"weights" * 100_000)
    store = tmp_path / "store"
    store.mkdir()
    proc = _serve(store)
    try:
        port = json.loads(proc.stdout.readline())["port"]
        out = _send(port, "--file", str(ckpt), "--ballast-bytes", "3000000", "--transfer-id", "m1",
                    "--chunk-bytes", "65536", "--json")
        assert out.returncode == 0, out.stderr
        report = json.loads(out.stdout)
        assert report["status"] == "completed" and report["size_bytes"] == ckpt.stat().st_size + 3_000_000
        assert (store / "m1").read_bytes() == ckpt.read_bytes()
        done = json.loads(proc.stdout.readline())
        assert done["event"] == "completed" and done["sha256"] == report["sha256"]
        human = _send(port, "--ballast-bytes", "100000")
        assert human.returncode == 0 and "completed" in human.stdout and "Mbit/s" in human.stdout
        bad = _send(port, "--ballast-bytes", "1000", "--token", "nope", "--json")
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        proc.stdout.close()
    assert proc.returncode == 0
    assert bad.returncode == 1 and "bad token" in json.loads(bad.stdout)["error"]


def test_cli_send_needs_something_to_send():
    out = _send(1, "--json")
    assert out.returncode == 2 and "--file" in out.stderr
