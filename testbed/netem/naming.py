"""Names of live resources. Interface names are limited to 15 characters by the kernel."""

from __future__ import annotations

import re
import secrets
import string

RUN_ID_LEN = 6
_ALPHABET = string.ascii_lowercase + string.digits
RUN_ID_RE = re.compile(rf"^[a-z0-9]{{{RUN_ID_LEN}}}$")
IFNAMSIZ = 15


def new_run_id() -> str:
    """Six random lower-case alphanumerics (36^6 ~ 2e9: collisions between concurrent runs are negligible)."""
    return "".join(secrets.choice(_ALPHABET) for _ in range(RUN_ID_LEN))


def check_run_id(run_id: str) -> str:
    if not RUN_ID_RE.match(run_id):
        raise ValueError(f"run id must be {RUN_ID_LEN} characters [a-z0-9], got {run_id!r}")
    return run_id


def ns_prefix(run_id: str) -> str:
    return f"tb-{check_run_id(run_id)}-"


def ns_name(run_id: str, role: str) -> str:
    """Namespace of a site (role = site name), of a link relay (``r<k>``), the management switch (``mgmt``)
    or the controller (``ctl``)."""
    return f"{ns_prefix(run_id)}{role}"


def if_prefix(run_id: str) -> str:
    return f"tb{check_run_id(run_id)}"


def if_name(run_id: str, tag: str) -> str:
    """``tb<run><tag>``; tag like ``w12a`` (WAN link 12, side a), ``m3`` (management of site 3)."""
    name = f"{if_prefix(run_id)}{tag}"
    if len(name) > IFNAMSIZ:
        raise ValueError(f"interface name {name!r} longer than {IFNAMSIZ} characters")
    return name


def run_of_ns(name: str) -> str | None:
    """The run id a namespace name belongs to, or None if it is not one of ours."""
    m = re.match(rf"^tb-([a-z0-9]{{{RUN_ID_LEN}}})-", name)
    return m.group(1) if m else None
