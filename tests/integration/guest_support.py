"""Helpers of the tests that run in the qemu guest (``testbed vm test``) where this host lacks a
kernel feature: capability checks that tolerate a cold kernel, and measurements for the host."""

from __future__ import annotations

import functools
import json
import os


@functools.lru_cache(maxsize=None)
def netem_available() -> bool:
    """A netem qdisc can really be added here. Probed again once if the first probe ran out of
    time: the first namespace, veth and qdisc of a freshly booted guest load kernel modules, which
    under software emulation can outlast the probe's deadline (a timeout is not an absence)."""
    from testbed.doctor import probe

    cap = probe("qdisc_netem")
    if cap.measured.get("timed_out"):
        cap = probe("qdisc_netem")
    return cap.available


def record(test: str, **values) -> None:
    """Print a measurement; in the guest also append it to ``$TESTBED_MEASUREMENTS`` (JSON lines),
    which ``testbed vm test`` brings back to the host."""
    row = {"test": test, **{k: round(v, 3) if isinstance(v, float) else v for k, v in values.items()}}
    print("measured:", json.dumps(row))
    path = os.environ.get("TESTBED_MEASUREMENTS")
    if path:
        with open(path, "a") as fh:
            fh.write(json.dumps(row) + "\n")
