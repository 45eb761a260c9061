"""Typed errors of the container runtime."""

from __future__ import annotations

from testbed.errors import TestbedError


class RuntimeUnavailable(TestbedError):
    """This machine cannot run container nodes: a tool is missing (``dockerd``, ``debootstrap``),
    or we are not root. The message says what to install."""


class DockerCommandError(TestbedError):
    """A ``docker`` (or image build) command failed. Keeps the command and its stderr."""

    def __init__(self, argv: list[str], returncode: int, stderr: str):
        self.argv = list(argv)
        self.returncode = returncode
        self.stderr = stderr
        tail = " | ".join(line.strip() for line in stderr.strip().splitlines()[-3:])
        super().__init__(f"`{' '.join(argv[:4])} ...` exited {returncode}: {tail or 'no stderr'}")
