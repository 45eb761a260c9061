"""A reader that stops early (``testbed schema | head``) is not an error: exit 0, nothing on
stderr, for every command (the entry point handles it). testbed's warnings are one line each."""

from __future__ import annotations

import subprocess
import sys
import warnings

import pytest

from testbed.cli import main
from testbed.errors import TestbedWarning
from tests.conftest import ROOT


def _closed_early(args: list[str], read: int) -> subprocess.CompletedProcess:
    """Run ``python -m testbed ARGS``, read ``read`` bytes of its stdout, then close the pipe."""
    proc = subprocess.Popen([sys.executable, "-m", "testbed", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            cwd=ROOT)
    if read:
        proc.stdout.read(read)
    proc.stdout.close()
    err = proc.stderr.read()
    proc.stderr.close()
    return subprocess.CompletedProcess(args, proc.wait(timeout=120), b"", err)


def test_schema_into_a_pipe_closed_mid_output_exits_0_quietly():
    done = _closed_early(["schema"], read=100)  # the schema is larger than a pipe holds: the write fails
    assert (done.returncode, done.stderr.decode()) == (0, "")


def test_a_reader_gone_before_the_first_line_exits_0_quietly():
    done = _closed_early(["validate", "scenarios/quickstart.yaml"], read=0)  # `testbed validate ... | true`
    assert (done.returncode, done.stderr.decode()) == (0, "")


def test_a_broken_pipe_that_is_not_stdout_is_still_an_error(monkeypatch, capsys):
    def broken(args):
        raise BrokenPipeError(32, "Broken pipe")  # e.g. a node agent's socket

    import testbed.cli.cmd_schema as schema

    monkeypatch.setattr(schema, "_schema", broken)
    assert main(["schema"]) == 1
    assert capsys.readouterr().err.strip() == "error: Broken pipe"


def test_testbed_warnings_are_one_line_on_the_cli(monkeypatch, capsys):
    import testbed.cli.cmd_schema as schema

    def warns(args):
        warnings.warn("something was left out", TestbedWarning, stacklevel=2)
        return 0

    monkeypatch.setattr(schema, "_schema", warns)
    assert main(["schema"]) == 0
    assert capsys.readouterr().err == "warning: something was left out\n"
    with pytest.warns(TestbedWarning):  # outside the CLI: an ordinary Python warning
        warns(None)
