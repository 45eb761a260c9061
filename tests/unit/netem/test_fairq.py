"""The fair queue's flow classifier (testbed.netem.fairq), run on crafted frames by a small classic-BPF
interpreter of the instructions it uses: one flow always lands in one class, the classes spread, and
what carries no flow goes to the first class."""

from __future__ import annotations

import ipaddress
import struct

import pytest

from testbed.netem import fairq

MAJOR = fairq.HTB_HANDLE


def run(prog, pkt: bytes) -> int:
    """Classic BPF as linux/filter.h defines the opcodes the classifier uses."""
    a = x = 0
    mem = [0] * 16
    pc = 0
    while True:
        code, jt, jf, k = prog[pc]
        assert 0 <= jt <= 255 and 0 <= jf <= 255 and pc + 1 + max(jt, jf) <= len(prog)  # forward, as the kernel checks
        pc += 1
        if code == 0x20:
            a = struct.unpack_from("!I", pkt, k)[0]
        elif code == 0x28:
            a = struct.unpack_from("!H", pkt, k)[0]
        elif code == 0x30:
            a = pkt[k]
        elif code == 0x40:
            a = struct.unpack_from("!I", pkt, x + k)[0]
        elif code == 0xB1:
            x = 4 * (pkt[k] & 0xF)
        elif code == 0x61:
            x = mem[k]
        elif code == 0x60:
            a = mem[k]
        elif code == 0x02:
            mem[k] = a
        elif code == 0x15:
            pc += jt if a == k else jf
        elif code == 0x45:
            pc += jt if a & k else jf
        elif code == 0x0C:
            a = (a + x) & 0xFFFFFFFF
        elif code == 0x04:
            a = (a + k) & 0xFFFFFFFF
        elif code == 0x24:
            a = (a * k) & 0xFFFFFFFF
        elif code == 0x74:
            a >>= k
        elif code == 0x16:
            return a
        elif code == 0x06:
            return k
        else:
            raise AssertionError(f"opcode {code:#x} not modelled")


def eth(ethertype: int) -> bytes:
    return b"\x02" * 6 + b"\x04" * 6 + struct.pack("!H", ethertype)


def v4(src: str, dst: str, proto: int = 6, sport: int = 40000, dport: int = 5201, frag: int = 0, ihl: int = 5) -> bytes:
    opts = b"\x01" * (4 * ihl - 20)
    hdr = struct.pack("!BBHHHBBH4s4s", 0x40 | ihl, 0, 60, 1, frag, 64, proto, 0,
                      ipaddress.IPv4Address(src).packed, ipaddress.IPv4Address(dst).packed) + opts
    return eth(0x0800) + hdr + struct.pack("!HH", sport, dport) + b"\0" * 16


def v6(src: str, dst: str, nxt: int = 6, sport: int = 40000, dport: int = 5201) -> bytes:
    hdr = struct.pack("!IHBB16s16s", 6 << 28, 20, nxt, 64, ipaddress.IPv6Address(src).packed,
                      ipaddress.IPv6Address(dst).packed)
    return eth(0x86DD) + hdr + struct.pack("!HH", sport, dport) + b"\0" * 16


PROG = fairq.classifier()


def cls(pkt: bytes) -> int:
    got = run(PROG, pkt)
    assert got >> 16 == MAJOR and 1 <= got & 0xFFFF <= fairq.BUCKETS
    return got & 0xFFFF


def test_a_flow_stays_in_its_class_and_its_ports_count():
    a = cls(v4("10.200.0.1", "10.200.0.2", sport=40000))
    assert cls(v4("10.200.0.1", "10.200.0.2", sport=40000)) == a
    assert cls(v4("10.200.0.1", "10.200.0.2", sport=40002)) != a
    assert cls(v4("10.200.0.1", "10.200.0.2", proto=17, sport=40002)) == cls(v4("10.200.0.1", "10.200.0.2", sport=40002))
    assert cls(v4("10.200.0.1", "10.200.0.2", sport=40000, ihl=7)) == a  # options: the ports are found past them


def test_consecutive_ports_spread_over_the_classes():
    """A sender's flows to one service differ by their source ports (often by 2): half as many of
    them as there are classes land in as many classes (the multiplicative hash spreads an arithmetic
    sequence evenly), and 4 never share one."""
    n = fairq.BUCKETS // 2
    got = [cls(v4("10.200.0.1", "10.200.0.2", sport=33000 + 2 * i)) for i in range(n)]
    assert len(set(got)) == n
    assert len(set(got[:4])) == 4


def test_later_fragments_and_other_protocols_hash_by_address():
    frag = cls(v4("10.200.0.1", "10.200.0.2", frag=185))  # offset != 0: no ports in this packet
    assert frag == cls(v4("10.200.0.1", "10.200.0.2", proto=1))  # ICMP: addresses only
    assert frag == cls(v4("10.200.0.1", "10.200.0.2", frag=185, sport=1, dport=2))
    assert cls(v4("10.200.0.1", "10.200.0.3", proto=1)) != frag


def test_ipv6_flows_and_what_carries_no_flow():
    a = cls(v6("fd00::1", "fd00::2", sport=40000))
    assert a == cls(v6("fd00::1", "fd00::2", sport=40000)) != cls(v6("fd00::1", "fd00::2", sport=40002))
    assert run(PROG, eth(0x0806) + b"\0" * 28) == (MAJOR << 16) | 1  # ARP: the first class


def test_the_batch_names_every_class_its_queue_and_the_filter():
    lines = fairq.batch("w0a", "1:1", 300_000, buckets=8)
    assert lines[0] == "qdisc add dev w0a parent 1:1 handle 10: htb default 1"
    assert sum(ln.startswith("class add") for ln in lines) == 8 and "classid 10:8 " in "\n".join(lines)
    assert sum(ln.startswith("qdisc add dev w0a parent 10:") and "limit 300000" in ln for ln in lines) == 8
    assert lines[-1].startswith("filter add dev w0a parent 10: prio 1 bpf bytecode ")
    with pytest.raises(ValueError, match="power of two"):
        fairq.classifier(buckets=1000)
    with pytest.raises(ValueError, match="limit_bytes"):
        fairq.batch("w0a", "1:1", 0)


def test_a_link_names_its_queue_and_a_wrong_one_is_refused():
    from testbed.netem.plan import LinkInput, plan_fabric

    plan = plan_fabric("tbfq01", ["a", "b"], [LinkInput("a", "b", 100, 100, queue="fifo")], "relay")
    assert plan.links[0].queue == "fifo"
    assert plan_fabric("tbfq01", ["a", "b"], [LinkInput("a", "b", 100, 100)], "relay").links[0].queue == "fair"
    with pytest.raises(ValueError, match="link a-b: queue 'sfq'"):
        plan_fabric("tbfq01", ["a", "b"], [LinkInput("a", "b", 100, 100, queue="sfq")], "relay")
