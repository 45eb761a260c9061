"""IPv4 BIG TCP on an interface: GSO/GRO super-packets larger than 64 KiB.

A GSO-mode delay relay (:mod:`testbed.netem.relay.fastrelay`) costs a fixed amount per super-frame on
top of its per-byte copies; BIG TCP lets the sites' stacks hand it fewer, larger ones. Linux
(6.3+) sets it per device with the rtnetlink attributes ``IFLA_GSO_IPV4_MAX_SIZE`` and
``IFLA_GRO_IPV4_MAX_SIZE``; Debian's iproute2 6.1 and pyroute2 0.9.7 do not know them, so this
module speaks rtnetlink itself (one ``RTM_NEWLINK`` with the two attributes, one ``RTM_GETLINK`` to
read them back). Acts in the network namespace of the calling thread (see ``nsexec.in_netns``).
"""

from __future__ import annotations

import errno
import functools
import os
import socket
import struct

from testbed.errors import TestbedError

RTM_NEWLINK, RTM_GETLINK = 16, 18
NLM_F_REQUEST, NLM_F_ACK = 0x1, 0x4
NLMSG_ERROR = 2
IFLA_GSO_IPV4_MAX_SIZE, IFLA_GRO_IPV4_MAX_SIZE = 63, 64
LEGACY_MAX_BYTES = 65536  # what every device allows without BIG TCP
# what the fabric allows on a compiled GSO-mode relay's four interfaces: 3 x 64 KiB measured best here
# (10 Gbit/s @ 25 ms: ~1.5x the goodput of 64 KiB; 384 KiB was no better); the relay's super-frame
# buffer (GSO_FRAME_BYTES in fastrelay.c, 256 KiB) must hold it plus its headers
RELAY_BIG_TCP_BYTES = 196608


class BigTcpError(TestbedError):
    """The kernel refused (or does not know) IPv4 BIG TCP sizes on an interface."""


def _nla(kind: int, value: int) -> bytes:
    return struct.pack("=HHI", 8, kind, value)


def newlink_request(ifindex: int, size_bytes: int, seq: int = 1) -> bytes:
    """The ``RTM_NEWLINK`` message that sets both IPv4 GSO and GRO maximum sizes of ``ifindex``."""
    body = struct.pack("=BxHiII", socket.AF_UNSPEC, 0, ifindex, 0, 0)
    body += _nla(IFLA_GSO_IPV4_MAX_SIZE, size_bytes) + _nla(IFLA_GRO_IPV4_MAX_SIZE, size_bytes)
    return struct.pack("=IHHII", 16 + len(body), RTM_NEWLINK, NLM_F_REQUEST | NLM_F_ACK, seq, 0) + body


def getlink_request(ifindex: int, seq: int = 2) -> bytes:
    body = struct.pack("=BxHiII", socket.AF_UNSPEC, 0, ifindex, 0, 0)
    return struct.pack("=IHHII", 16 + len(body), RTM_GETLINK, NLM_F_REQUEST, seq, 0) + body


def parse_sizes(msg: bytes) -> dict[str, int]:
    """``{"gso_ipv4_max_size": .., "gro_ipv4_max_size": ..}`` from one ``RTM_NEWLINK`` reply (the
    attributes the kernel sent; a kernel without BIG TCP sends neither)."""
    length, kind = struct.unpack_from("=IH", msg, 0)
    if kind != RTM_NEWLINK:
        raise BigTcpError(f"unexpected netlink reply type {kind}")
    out: dict[str, int] = {}
    off = 16 + 16
    while off + 4 <= length:
        alen, atype = struct.unpack_from("=HH", msg, off)
        if alen < 4:
            break
        atype &= 0x3FFF
        if atype == IFLA_GSO_IPV4_MAX_SIZE:
            out["gso_ipv4_max_size"] = struct.unpack_from("=I", msg, off + 4)[0]
        elif atype == IFLA_GRO_IPV4_MAX_SIZE:
            out["gro_ipv4_max_size"] = struct.unpack_from("=I", msg, off + 4)[0]
        off += (alen + 3) & ~3
    return out


def _ack_errno(msg: bytes) -> int:
    length, kind = struct.unpack_from("=IH", msg, 0)
    if kind != NLMSG_ERROR:
        raise BigTcpError(f"unexpected netlink reply type {kind}")
    return -struct.unpack_from("=i", msg, 16)[0]


def _talk(request: bytes) -> bytes:
    with socket.socket(socket.AF_NETLINK, socket.SOCK_RAW | socket.SOCK_CLOEXEC, socket.NETLINK_ROUTE) as s:
        s.bind((0, 0))
        s.send(request)
        return s.recv(65536)


def get_sizes(ifname: str) -> dict[str, int]:
    """The IPv4 GSO/GRO maximum sizes of ``ifname`` (empty dict: this kernel has no BIG TCP)."""
    return parse_sizes(_talk(getlink_request(socket.if_nametoindex(ifname))))


@functools.cache
def supported() -> bool:
    """True when this kernel reports IPv4 BIG TCP sizes (6.3+; asked once per process, of ``lo``)."""
    try:
        return bool(get_sizes("lo"))
    except (OSError, BigTcpError):
        return False


def set_sizes(ifname: str, size_bytes: int) -> None:
    """Allow IPv4 GSO and GRO packets of up to ``size_bytes`` on ``ifname``, then read them back.

    Raises :class:`BigTcpError` naming the interface when the kernel refuses (too old, or a size
    over the device's TSO limit) or reads back something else."""
    if not LEGACY_MAX_BYTES <= size_bytes <= 512 * 1024:
        raise BigTcpError(f"{ifname}: BIG TCP size {size_bytes} outside {LEGACY_MAX_BYTES}..{512 * 1024} bytes")
    index = socket.if_nametoindex(ifname)
    err = _ack_errno(_talk(newlink_request(index, size_bytes)))
    if err:
        raise BigTcpError(f"{ifname}: cannot set IPv4 GSO/GRO max size {size_bytes}: {os.strerror(err)}"
                          + (" (kernel older than 6.3, or over the device's TSO limit?)"
                             if err in (errno.EINVAL, errno.EOPNOTSUPP) else ""))
    got = get_sizes(ifname)
    if got.get("gso_ipv4_max_size") != size_bytes or got.get("gro_ipv4_max_size") != size_bytes:
        raise BigTcpError(f"{ifname}: IPv4 GSO/GRO max size reads back {got}, not {size_bytes}")
