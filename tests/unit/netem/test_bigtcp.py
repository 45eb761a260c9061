"""IPv4 BIG TCP netlink messages (testbed/netem/bigtcp.py), built and parsed without privileges."""

import re
import struct

import pytest

from testbed.netem import bigtcp
from testbed.netem.relay.fastrelay import SOURCE as FASTRELAY_C


def _reply(attrs: dict[int, int], kind: int = bigtcp.RTM_NEWLINK) -> bytes:
    body = struct.pack("=BxHiII", 0, 1, 7, 0, 0)
    body += struct.pack("=HHI", 8, 3, 1500)  # another attribute (IFLA_MTU) first: skipped
    for t, v in attrs.items():
        body += struct.pack("=HHI", 8, t, v)
    return struct.pack("=IHHII", 16 + len(body), kind, 0, 1, 0) + body


def test_newlink_request_carries_both_sizes():
    msg = bigtcp.newlink_request(7, 196608, seq=5)
    length, kind, flags, seq, _ = struct.unpack_from("=IHHII", msg)
    assert (length, kind, seq) == (len(msg), bigtcp.RTM_NEWLINK, 5)
    assert flags & bigtcp.NLM_F_ACK
    assert struct.unpack_from("=i", msg, 16 + 4)[0] == 7  # ifinfomsg.ifi_index
    attrs = {struct.unpack_from("=HHI", msg, o)[1]: struct.unpack_from("=HHI", msg, o)[2] for o in (32, 40)}
    assert attrs == {bigtcp.IFLA_GSO_IPV4_MAX_SIZE: 196608, bigtcp.IFLA_GRO_IPV4_MAX_SIZE: 196608}


def test_parse_sizes_reads_the_two_attributes():
    r = _reply({bigtcp.IFLA_GSO_IPV4_MAX_SIZE: 196608, bigtcp.IFLA_GRO_IPV4_MAX_SIZE: 65536})
    assert bigtcp.parse_sizes(r) == {"gso_ipv4_max_size": 196608, "gro_ipv4_max_size": 65536}
    assert bigtcp.parse_sizes(_reply({})) == {}  # a kernel without BIG TCP
    with pytest.raises(bigtcp.BigTcpError, match="reply type"):
        bigtcp.parse_sizes(_reply({}, kind=bigtcp.NLMSG_ERROR))


def test_set_sizes_refuses_a_size_out_of_range_naming_the_interface():
    with pytest.raises(bigtcp.BigTcpError, match="^veth9: BIG TCP size 1024 outside"):
        bigtcp.set_sizes("veth9", 1024)


def test_relay_frame_buffer_holds_a_big_tcp_frame():
    src = FASTRELAY_C.read_text()
    m = re.search(r"#define GSO_FRAME_BYTES \((\d+) \* (\d+)\)", src)
    assert m, "GSO_FRAME_BYTES not found in fastrelay.c"
    frame = int(m.group(1)) * int(m.group(2))
    # + virtio_net_hdr (10) + Ethernet (14) + VLAN tag, and the relay drops len >= its buffer
    assert bigtcp.RELAY_BIG_TCP_BYTES + 64 < frame
