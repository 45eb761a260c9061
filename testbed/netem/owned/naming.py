"""Names of live resources. Interface names are limited to 15 characters by the kernel."""

from __future__ import annotations

import re

from testbed.run_id import RUN_ID_LEN, RUN_ID_RE, check_run_id, new_run_id

__all__ = ["RUN_ID_LEN", "RUN_ID_RE", "IFNAMSIZ", "check_run_id", "new_run_id", "ns_prefix", "ns_name", "if_prefix",
           "if_name", "run_of_ns"]
IFNAMSIZ = 15


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
