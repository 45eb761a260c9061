"""A per-flow fair queue under a link's shaper: what a flow gets when it shares the link.

The shaper (:mod:`testbed.netem.qdisc`) sits on the sending site's own WAN interface. With a single
FIFO there, flows sharing a link split it by how many packets each holds in that queue, and TCP Small
Queues caps that at about two GSO packets per flow (1 ms of its pacing rate): the split comes in
steps of whole packets (3:2:2:2 for four flows), congestion control never acts, and a flow that
starts small stays small (its packets stay small, so it never fills its window and its window never
grows). A router's queue does not see that limit, because the sender's packets have left the host.

So every shaped interface gets a deficit-round-robin scheduler as the tbf's child: an ``htb`` whose
:data:`BUCKETS` classes have a rate far above any link's (the tbf alone sets the rate; the htb only
takes turns among the classes that hold packets, :data:`QUANTUM_BYTES` each turn), each with a bfifo
of the link's queue, and a classic-BPF classifier that hashes a packet's flow (IPv4 or IPv6
addresses, and TCP/UDP ports where the packet carries them) into one of the classes. Every flow
with a packet waiting gets an equal share of the link's rate: the fair share that the sim's model of
cross-traffic and the ``fair_share`` predictor assume. It is a stochastic fair queue (like sfq and
fq_codel, which this kernel lacks): two flows that hash into one bucket share one turn, which for a
new flow beside ``n`` others happens with probability about ``n / BUCKETS``.

The sites' namespaces also set ``net.ipv4.tcp_min_tso_segs`` to :data:`MIN_TSO_SEGS`, so a flow's
packets are full GSO packets from its first window on, whatever its pacing rate: a flow that holds
two small packets in its bucket would empty it between turns and lose its share.

The classes are created with one ``tc -batch`` run per namespace (one netlink request per class from
Python takes 0.7 ms). :data:`BUCKETS` weighs collisions against set-up time, which grows faster than
the class count: on 2 cores, a 5-site full mesh (20 interfaces) came up 0.25 s later with 256
classes per interface, 1.1 s with 512 and 3.5 s with 1024. ``queue: fifo`` on a link keeps the
tbf's own FIFO.
"""

from __future__ import annotations

import shutil
import subprocess

BUCKETS = 256
QUANTUM_BYTES = 65536  # one GSO packet a turn
CLASS_RATE = "100gbit"  # above every link's rate: the tbf above shapes, the htb only takes turns
HTB_HANDLE = 0x10  # the htb major under the tbf: classes 10:1 .. 10:100
MIN_TSO_SEGS = 44  # 44 x 1448-byte segments: a full 64 KiB GSO packet


class FairQueueError(RuntimeError):
    pass


# classic BPF opcodes (linux/filter.h) the classifier uses
_LD_W_ABS, _LD_H_ABS, _LD_B_ABS = 0x20, 0x28, 0x30
_LD_W_IND, _LD_H_IND = 0x40, 0x48
_LDX_B_MSH, _LDX_MEM, _LD_MEM = 0xB1, 0x61, 0x60
_ST = 0x02
_JEQ_K, _JSET_K = 0x15, 0x45
_ADD_X, _ADD_K, _MUL_K, _RSH_K = 0x0C, 0x04, 0x24, 0x74
_RET_A, _RET_K = 0x16, 0x06
_GOLDEN = 2654435761  # Knuth's multiplicative hash: consecutive ports land far apart


def classifier(major: int = HTB_HANDLE, buckets: int = BUCKETS) -> list[tuple[int, int, int, int]]:
    """The cBPF program (code, jt, jf, k) that returns the classid ``major:(1 + hash mod buckets)`` of
    a packet, from its Ethernet header on. IPv4: source + destination address, plus the 32-bit port
    word for TCP and UDP when the packet is not a later fragment. IPv6: the addresses' last 32 bits,
    plus the ports when the next header is TCP or UDP. Anything else (ARP) goes to the first class."""
    bits = buckets.bit_length() - 1
    if buckets < 2 or 1 << bits != buckets:
        raise ValueError(f"buckets must be a power of two >= 2, got {buckets}")
    base = (major << 16) | 1
    prog = [
        ("", _LD_H_ABS, None, None, 12),  # ethertype
        ("", _JEQ_K, None, "ip6", 0x0800),
        ("", _LD_W_ABS, None, None, 26), ("", _ST, None, None, 0),  # M0 = saddr
        ("", _LD_W_ABS, None, None, 30), ("", _LDX_MEM, None, None, 0), ("", _ADD_X, None, None, 0),
        ("", _ST, None, None, 0),  # M0 = saddr + daddr
        ("", _LD_B_ABS, None, None, 23),  # protocol
        ("", _JEQ_K, "v4ports", None, 6),
        ("", _JEQ_K, "v4ports", "hash", 17),
        ("v4ports", _LD_H_ABS, None, None, 20),  # flags + fragment offset
        ("", _JSET_K, "hash", None, 0x1FFF),  # a later fragment carries no ports
        ("", _LDX_B_MSH, None, None, 14),  # X = IPv4 header length
        ("", _LD_W_IND, None, None, 14),  # source and destination port
        ("", _LDX_MEM, None, None, 0), ("", _ADD_X, None, None, 0), ("", _ST, None, None, 0),
        ("hash", _LD_MEM, None, None, 0),
        ("", _MUL_K, None, None, _GOLDEN),
        ("", _RSH_K, None, None, 32 - bits),
        ("", _ADD_K, None, None, base),
        ("", _RET_A, None, None, 0),
        ("ip6", _JEQ_K, None, "other", 0x86DD),
        ("", _LD_W_ABS, None, None, 34), ("", _ST, None, None, 0),  # last word of the source
        ("", _LD_W_ABS, None, None, 50), ("", _LDX_MEM, None, None, 0), ("", _ADD_X, None, None, 0),
        ("", _ST, None, None, 0),
        ("", _LD_B_ABS, None, None, 20),  # next header
        ("", _JEQ_K, "v6ports", None, 6),
        ("", _JEQ_K, "v6ports", "hash6", 17),  # classic BPF jumps only forward: a tail of its own
        ("v6ports", _LD_W_ABS, None, None, 54),
        ("", _LDX_MEM, None, None, 0), ("", _ADD_X, None, None, 0), ("", _ST, None, None, 0),
        ("hash6", _LD_MEM, None, None, 0), ("", _MUL_K, None, None, _GOLDEN), ("", _RSH_K, None, None, 32 - bits),
        ("", _ADD_K, None, None, base), ("", _RET_A, None, None, 0),
        ("other", _RET_K, None, None, base),
    ]
    labels = {lab: i for i, (lab, *_) in enumerate(prog) if lab}
    out = [(code, labels[jt] - i - 1 if jt else 0, labels[jf] - i - 1 if jf else 0, k)
           for i, (_, code, jt, jf, k) in enumerate(prog)]
    assert all(0 <= t <= 255 and 0 <= f <= 255 for _, t, f, _ in out)  # the kernel's checker: forward, 8-bit
    return out


def bytecode(prog: list[tuple[int, int, int, int]]) -> str:
    """tc's ``bpf bytecode`` argument: the count, then ``code jt jf k`` per instruction."""
    return f"{len(prog)}," + ",".join(f"{c} {t} {f} {k}" for c, t, f, k in prog)


def batch(dev: str, parent: str, limit_bytes: int, buckets: int = BUCKETS) -> list[str]:
    """The ``tc -batch`` lines that put the fair queue under ``parent`` (the tbf's class) of ``dev``."""
    if limit_bytes < 1:
        raise ValueError("limit_bytes must be >= 1")
    h = f"{HTB_HANDLE:x}"
    lines = [f"qdisc add dev {dev} parent {parent} handle {h}: htb default 1"]
    for i in range(1, buckets + 1):
        lines.append(f"class add dev {dev} parent {h}: classid {h}:{i:x} htb rate {CLASS_RATE} quantum {QUANTUM_BYTES}")
        lines.append(f"qdisc add dev {dev} parent {h}:{i:x} bfifo limit {limit_bytes}")
    lines.append(f'filter add dev {dev} parent {h}: prio 1 bpf bytecode "{bytecode(classifier(HTB_HANDLE, buckets))}" '
                 f"flowid {h}:1")
    return lines


def install(netns: str, lines: list[str]) -> None:
    """Run :func:`batch` lines (of one or more interfaces) in ``netns`` (a namespace's name or a
    ``/proc/PID/ns/net`` path), one ``tc`` for them all. A fair queue goes with its tbf when the
    interface or its namespace is deleted."""
    tc, nsenter = shutil.which("tc"), shutil.which("nsenter")
    if tc is None or nsenter is None:
        raise FairQueueError("the fair queue needs tc (iproute2) and nsenter (util-linux)")
    path = netns if netns.startswith("/") else f"/run/netns/{netns}"
    res = subprocess.run([nsenter, f"--net={path}", tc, "-batch", "-"], input="\n".join(lines) + "\n",
                         capture_output=True, text=True, timeout=120)
    if res.returncode != 0:
        first = next((ln for ln in res.stderr.splitlines() if ln.strip()), "no message")
        raise FairQueueError(f"tc could not install the fair queue ({first[:200]}); "
                             "it needs the kernel's htb, bfifo and cls_bpf (testbed doctor)")
