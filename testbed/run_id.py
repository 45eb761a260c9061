"""Run ids: six random lower-case alphanumerics naming every live resource of one run.

A leaf (imports nothing of testbed): names of namespaces and interfaces (``testbed.netem.owned.naming``),
cgroups (``testbed.power.throttle.cgroups``) and engine directories are all built from a run id.
"""

from __future__ import annotations

import re
import secrets
import string

RUN_ID_LEN = 6
_ALPHABET = string.ascii_lowercase + string.digits
RUN_ID_RE = re.compile(rf"^[a-z0-9]{{{RUN_ID_LEN}}}$")


def new_run_id() -> str:
    """Six random lower-case alphanumerics (36^6 ~ 2e9: collisions between concurrent runs are negligible)."""
    return "".join(secrets.choice(_ALPHABET) for _ in range(RUN_ID_LEN))


def check_run_id(run_id: str) -> str:
    if not RUN_ID_RE.match(run_id):
        raise ValueError(f"run id must be {RUN_ID_LEN} characters [a-z0-9], got {run_id!r}")
    return run_id
