"""The one error type of ``testbed.vm``."""

from __future__ import annotations

from testbed.errors import TestbedError


class VmError(TestbedError):
    """The guest could not be built or booted, or did not report (not: its tests failed)."""

    exit_code = 3
